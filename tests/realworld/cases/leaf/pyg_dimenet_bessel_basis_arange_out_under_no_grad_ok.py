"""BesselBasisLayer.reset_parameters filling the frequencies under torch.no_grad() and then re-enabling requires_grad on them (the out= write under no_grad clears the flag on torch 2.13), as PyG's layer does today: the model builds and freq gets a gradient.

source: https://github.com/pyg-team/pytorch_geometric/pull/4424
kind: lookalike
"""
import math

import torch
import torch.nn as nn

PI = math.pi


class Envelope(torch.nn.Module):
    def __init__(self, exponent):
        super().__init__()
        self.p = exponent + 1
        self.a = -(self.p + 1) * (self.p + 2) / 2
        self.b = self.p * (self.p + 2)
        self.c = -self.p * (self.p + 1) / 2

    def forward(self, x):
        p, a, b, c = self.p, self.a, self.b, self.c
        x_pow_p0 = x.pow(p - 1)
        x_pow_p1 = x_pow_p0 * x
        x_pow_p2 = x_pow_p1 * x
        return 1. / x + a * x_pow_p0 + b * x_pow_p1 + c * x_pow_p2


class BesselBasisLayer(torch.nn.Module):
    def __init__(self, num_radial, cutoff=5.0, envelope_exponent=5):
        super().__init__()
        self.cutoff = cutoff
        self.envelope = Envelope(envelope_exponent)
        self.freq = torch.nn.Parameter(torch.Tensor(num_radial))
        self.reset_parameters()

    def reset_parameters(self):
        with torch.no_grad():
            torch.arange(1, self.freq.numel() + 1, out=self.freq).mul_(PI)
        self.freq.requires_grad_()

    def forward(self, dist):
        dist = dist.unsqueeze(-1) / self.cutoff
        return self.envelope(dist) * (self.freq * dist).sin()


class DimeNet(nn.Module):
    """DimeNet cut down to its radial basis and an output block."""

    def __init__(self, hidden_channels=5, out_channels=19, num_radial=6, cutoff=5.0, envelope_exponent=5):
        super().__init__()
        self.rbf = BesselBasisLayer(num_radial, cutoff, envelope_exponent)
        self.lin = nn.Sequential(nn.Linear(num_radial, hidden_channels), nn.SiLU(), nn.Linear(hidden_channels, out_channels))

    def forward(self, dist, batch):
        out = self.lin(self.rbf(dist))
        return torch.zeros(int(batch.max()) + 1, out.size(-1)).index_add(0, batch, out)


torch.manual_seed(0)
model = DimeNet(hidden_channels=5, out_channels=19)
dist, batch = torch.rand(30) * 4.5 + 0.5, torch.arange(3).repeat_interleave(10)
loss = model(dist, batch).pow(2).mean()
loss.backward()
print(loss.item(), model.rbf.freq.grad.norm().item())
