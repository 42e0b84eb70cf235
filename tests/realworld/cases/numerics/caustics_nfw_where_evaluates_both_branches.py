"""NFW lens deflection picks its x < 1 and x > 1 formulas with torch.where; the unused branch is NaN and its NaN gradient leaks.

source: https://github.com/Ciela-Institute/caustics/pull/83
kind: bug
symptom: silent
verified: the loss is finite but scale_radius.grad is NaN, and scale_radius is NaN after one Adam step; finite with the branch inputs made safe first
"""
import torch
import torch.nn as nn


class NFW(nn.Module):
    def __init__(self):
        super().__init__()
        self.log_scale_radius = nn.Parameter(torch.tensor(0.0))
        self.log_kappa_s = nn.Parameter(torch.tensor(-1.0))

    @staticmethod
    def _f(x):
        inner = torch.arccosh(1 / x) / torch.sqrt(1 - x**2)
        outer = torch.arccos(1 / x) / torch.sqrt(x**2 - 1)
        return torch.where(x < 1, inner, outer)  # ROOT

    def deflection(self, r):
        scale_radius = self.log_scale_radius.exp()
        x = r / scale_radius
        h = torch.log(x / 2) + self._f(x)
        return 4 * self.log_kappa_s.exp() * scale_radius * h / x


torch.manual_seed(0)
lens = NFW()
optimizer = torch.optim.Adam(lens.parameters(), lr=1e-2)
r = torch.cat([torch.linspace(0.2, 0.9, 32), torch.linspace(1.1, 3.0, 32)])
observed = 0.3 * torch.ones(64)
for it in range(3):
    loss = ((lens.deflection(r) - observed) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    print(it, loss.item(), lens.log_scale_radius.grad)
    optimizer.step()
