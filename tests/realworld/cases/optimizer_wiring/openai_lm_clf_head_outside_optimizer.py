"""Fine-tuning the OpenAI transformer: OpenAIAdam gets model.parameters(), not the new clf_head.

source: https://github.com/huggingface/pytorch-openai-transformer-lm/pull/6
kind: bug
symptom: silent
verified: clf_head.linear.weight is identical after training; its .grad is filled every step
"""
import torch
import torch.nn as nn


class TransformerModel(nn.Module):
    def __init__(self, vocab, n_embd):
        super().__init__()
        self.embed = nn.Embedding(vocab, n_embd)
        self.h = nn.TransformerEncoderLayer(n_embd, nhead=2, dim_feedforward=16, batch_first=True)

    def forward(self, x):
        return self.h(self.embed(x))


class ClfHead(nn.Module):
    def __init__(self, n_embd, n_class):
        super().__init__()
        self.linear = nn.Linear(n_embd, n_class)

    def forward(self, h):
        return self.linear(h[:, -1])


class LossCompute:
    def __init__(self, clf_criterion, opt=None):
        self.clf_criterion = clf_criterion
        self.opt = opt

    def __call__(self, Y, clf_logits):
        train_loss = self.clf_criterion(clf_logits, Y).sum()
        train_loss.backward()
        if self.opt is not None:
            self.opt.step()
            self.opt.zero_grad()
        return train_loss.item()


torch.manual_seed(0)
model = TransformerModel(vocab=50, n_embd=8)
clf_head = ClfHead(n_embd=8, n_class=2)
criterion = nn.CrossEntropyLoss(reduction="none")
model_opt = torch.optim.Adam(model.parameters(), lr=1e-3)  # ROOT
compute_loss_fct = LossCompute(criterion, model_opt)
before = clf_head.linear.weight.detach().clone()
for _ in range(3):
    XMB, YMB = torch.randint(0, 50, (4, 7)), torch.randint(0, 2, (4,))
    clf_logits = clf_head(model(XMB))
    compute_loss_fct(YMB, clf_logits)
print("clf_head unchanged:", torch.equal(before, clf_head.linear.weight))
