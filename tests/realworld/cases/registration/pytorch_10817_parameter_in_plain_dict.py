"""A parameter stored in a plain dict attribute (self.d['d'] = nn.Parameter(...)) is not registered: named_parameters() lists only p, so SGD never updates d['d'] and zero_grad never clears its gradient.

source: https://github.com/pytorch/pytorch/issues/10817
kind: bug
symptom: silent
verified: named_parameters() gives ['p']; after 20 SGD steps (lr 0.05) d['d'] is unchanged (max abs difference 0.0) while its never-cleared gradient has grown to norm 23.4, and the loss is 1.037; with nn.ParameterDict the names are ['p', 'd.d'], d['d'] moves by 0.66 and the loss is 0.820
"""
import torch
import torch.nn as nn


class model(nn.Module):
    def __init__(self):
        super().__init__()
        self.d = dict()  # ROOT
        self.d['d'] = nn.Parameter(torch.randn(3, 3))
        self.p = nn.Parameter(torch.randn(3, 3))

    def forward(self, x):
        return x @ self.d['d'] @ self.p


torch.manual_seed(0)
m = model()
opt = torch.optim.SGD(m.parameters(), lr=0.05)
x, y = torch.randn(16, 3), torch.randn(16, 3)
for step in range(20):
    opt.zero_grad()
    loss = ((m(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
print(step, loss.item())
