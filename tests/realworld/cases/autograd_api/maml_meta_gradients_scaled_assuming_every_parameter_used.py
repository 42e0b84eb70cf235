"""learn2learn-style MAML loop: the adaptation uses autograd.grad(..., allow_unused=True) because one head is not used by the task, and the meta-gradients are then averaged with p.grad.data.mul_(1.0 / meta_batch_size) over every parameter, but the unused head never received a .grad.

source: https://github.com/learnables/learn2learn/issues/428
kind: bug
symptom: crash
verified: 'NoneType' object has no attribute 'data'
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Learner(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 16)
        self.head = nn.Linear(16, 5)
        self.aux_head = nn.Linear(16, 1)  # used by another task family only

    def forward(self, x, params=None):
        if params is None:
            params = dict(self.named_parameters())
        h = F.relu(F.linear(x, params['body.weight'], params['body.bias']))
        return F.linear(h, params['head.weight'], params['head.bias'])


def fast_adapt(model, x, y, adaptation_steps=1, lr=0.4):
    params = dict(model.named_parameters())
    for _ in range(adaptation_steps):
        loss = F.cross_entropy(model(x, params), y)
        grads = torch.autograd.grad(loss, list(params.values()), create_graph=True, allow_unused=True)
        params = {name: (p - lr * g if g is not None else p) for (name, p), g in zip(params.items(), grads)}
    return F.cross_entropy(model(x, params), y)


torch.manual_seed(0)
maml = Learner()
opt = torch.optim.Adam(maml.parameters(), lr=1e-3)
meta_batch_size = 4
for iteration in range(2):
    opt.zero_grad()
    for task in range(meta_batch_size):
        x, y = torch.randn(10, 8), torch.randint(0, 5, (10,))
        evaluation_error = fast_adapt(maml, x, y)
        evaluation_error.backward()
    # Average the accumulated gradients and optimize
    for p in maml.parameters():
        p.grad.data.mul_(1.0 / meta_batch_size)  # ROOT
    opt.step()
