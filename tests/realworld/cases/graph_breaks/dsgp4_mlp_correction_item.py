"""An MLP correction handed to the orbit propagator with .item(): the propagated loss has no graph.

source: https://github.com/esa/dSGP4/issues/14
kind: bug
symptom: crash
verified: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn


class TLE:
    def __init__(self, bstar, no_kozai):
        self.bstar = bstar
        self.no_kozai = no_kozai


def propagate(tle, tsinces):
    drag = 1.0 - tle.bstar * tsinces
    angle = tle.no_kozai * tsinces
    return torch.stack([drag * torch.cos(angle), drag * torch.sin(angle)], dim=-1)


torch.manual_seed(0)
mlp = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 1))
optimizer = torch.optim.Adam(mlp.parameters(), lr=1e-3)
features = torch.randn(1, 3)
tsinces = torch.linspace(0, 10, 20)
target = propagate(TLE(1e-3, 0.06), tsinces)
for epoch in range(3):
    optimizer.zero_grad()
    correction = mlp(features)
    tle = TLE(bstar=correction.squeeze().item(), no_kozai=0.06)  # ROOT
    pred = propagate(tle, tsinces)
    loss = ((pred - target) ** 2).mean()
    loss.backward()  # SYMPTOM
    optimizer.step()
