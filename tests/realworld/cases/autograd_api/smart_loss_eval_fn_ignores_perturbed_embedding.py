"""SMART regularization: the eval_fn handed to SMARTLoss ignores the perturbed embedding it is called with.

source: https://github.com/archinetai/smart-pytorch/issues/5
kind: bug
symptom: crash
verified: appears to not have been used in the graph
"""
from itertools import count
import torch
import torch.nn as nn
import torch.nn.functional as F


def inf_norm(x):
    return torch.norm(x, p=float('inf'), dim=-1, keepdim=True)


class SMARTLoss(nn.Module):
    def __init__(self, eval_fn, loss_fn, loss_last_fn=None, norm_fn=inf_norm, num_steps=1,
                 step_size=1e-3, epsilon=1e-6, noise_var=1e-5):
        super().__init__()
        self.eval_fn, self.loss_fn = eval_fn, loss_fn
        self.loss_last_fn = loss_last_fn if loss_last_fn is not None else loss_fn
        self.norm_fn, self.num_steps = norm_fn, num_steps
        self.step_size, self.epsilon, self.noise_var = step_size, epsilon, noise_var

    def forward(self, embed, state):
        noise = torch.randn_like(embed, requires_grad=True) * self.noise_var
        for i in count():
            embed_perturbed = embed + noise
            state_perturbed = self.eval_fn(embed_perturbed)
            if i == self.num_steps:
                return self.loss_last_fn(state_perturbed, state)
            loss = self.loss_fn(state_perturbed, state.detach())
            noise_gradient, = torch.autograd.grad(loss, noise)
            step = noise + self.step_size * noise_gradient
            noise = step / (self.norm_fn(step) + self.epsilon)
            noise = noise.detach().requires_grad_()


class Classifier(nn.Module):
    def __init__(self, vocab=30, dim=16, num_labels=3):
        super().__init__()
        self.embeddings = nn.Embedding(vocab, dim)
        self.encoder = nn.Sequential(nn.Linear(dim, dim), nn.Tanh())
        self.classifier = nn.Linear(dim, num_labels)

    def forward(self, inputs_embeds):
        return self.classifier(self.encoder(inputs_embeds).mean(1))


torch.manual_seed(0)
model = Classifier()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
input_ids, labels = torch.randint(0, 30, (4, 7)), torch.randint(0, 3, (4,))


def eval_fn(embed):
    return model(model.embeddings(input_ids))  # ROOT


smart_loss_fn = SMARTLoss(eval_fn=eval_fn, loss_fn=lambda x, y: F.kl_div(F.log_softmax(x, -1), F.softmax(y, -1), reduction='batchmean'))
embed = model.embeddings(input_ids)
state = model(embed)
loss = F.cross_entropy(state, labels) + 0.02 * smart_loss_fn(embed, state)  # SYMPTOM
optimizer.zero_grad()
loss.backward()
optimizer.step()
