"""NFW lens deflection feeds each torch.where branch only inputs valid for it, so no branch produces NaN.

source: https://github.com/pytorch/pytorch/issues/52248
kind: lookalike
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
        below = x < 1
        x_in = torch.where(below, x, torch.full_like(x, 0.5))
        x_out = torch.where(below, torch.full_like(x, 2.0), x)
        inner = torch.arccosh(1 / x_in) / torch.sqrt(1 - x_in**2)
        outer = torch.arccos(1 / x_out) / torch.sqrt(x_out**2 - 1)
        return torch.where(below, inner, outer)

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
