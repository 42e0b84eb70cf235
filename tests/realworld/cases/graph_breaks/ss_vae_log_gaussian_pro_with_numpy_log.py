"""SS-VAE's log_Gaussian_pro takes np.log of the posterior variance, a tensor that requires grad.

source: https://github.com/GuHY777/SS-VAE-pytorch/issues/1
kind: bug
symptom: crash
verified: RuntimeError: Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.
"""
import numpy as np
import torch
import torch.nn as nn


def log_Gaussian_pro(x, mu, var):
    return torch.sum(-0.5 * np.log(2 * np.pi * var) - (x - mu) ** 2 / (2 * var), dim=1)  # ROOT


class Encoder(nn.Module):
    def __init__(self, x_dim=20, z_dim=4):
        super().__init__()
        self.hidden = nn.Linear(x_dim, 32)
        self.mu = nn.Linear(32, z_dim)
        self.logvar = nn.Linear(32, z_dim)

    def forward(self, x):
        h = torch.relu(self.hidden(x))
        z_mu, z_var = self.mu(h), self.logvar(h).exp()
        z = z_mu + z_var.sqrt() * torch.randn_like(z_mu)
        return z, z_mu, z_var


torch.manual_seed(0)
encoder = Encoder()
optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-3)
x = torch.randn(8, 20)
z, z_mu, z_var = encoder(x)
log_q_z = log_Gaussian_pro(z, z_mu, z_var)
loss = log_q_z.mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()
