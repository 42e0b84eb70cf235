"""The same module with the dict replaced by nn.ParameterDict (the registration the maintainers point to): d['d'] is registered as 'd.d', trained and zeroed with p.

source: https://github.com/pytorch/pytorch/issues/10817
kind: lookalike
"""
import torch
import torch.nn as nn


class model(nn.Module):
    def __init__(self):
        super().__init__()
        self.d = nn.ParameterDict()
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
