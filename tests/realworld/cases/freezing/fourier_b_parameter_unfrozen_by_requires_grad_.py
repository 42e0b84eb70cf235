"""GaussianEncoding keeps its random matrix b as a Parameter with requires_grad=False; a later unfreeze trains it.

source: https://github.com/jmclong/random-fourier-features-pytorch/issues/6
kind: bug
symptom: silent
verified: model[0].b changes after model.requires_grad_(True) although it must stay a fixed random sample
"""
import numpy as np
import torch
import torch.nn as nn


class GaussianEncoding(nn.Module):
    def __init__(self, sigma, input_size, encoded_size):
        super().__init__()
        b = torch.randn(encoded_size, input_size) * sigma
        self.b = nn.parameter.Parameter(b, requires_grad=False)  # ROOT

    def forward(self, v):
        vp = 2 * np.pi * v @ self.b.T
        return torch.cat((torch.cos(vp), torch.sin(vp)), dim=-1)


torch.manual_seed(0)
model = nn.Sequential(GaussianEncoding(sigma=10.0, input_size=2, encoded_size=8), nn.Linear(16, 1))
x, y = torch.rand(32, 2), torch.rand(32, 1)

model.requires_grad_(False)
model[1].requires_grad_(True)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for _ in range(3):
    optimizer.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()

model.requires_grad_(True)
for _ in range(3):
    optimizer.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()
