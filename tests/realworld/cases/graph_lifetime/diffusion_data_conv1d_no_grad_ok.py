"""Data reshaped by a fixed Conv1d once under no_grad before the loop: plain data, every step trains.

source: https://github.com/lucidrains/denoising-diffusion-pytorch/issues/109
kind: lookalike
verified: three steps run, the denoiser weights change
"""
import torch
import torch.nn as nn


class Denoiser(nn.Module):
    def __init__(self, channels=3):
        super().__init__()
        self.net = nn.Sequential(nn.Conv1d(channels, 16, 3, padding=1), nn.SiLU(), nn.Conv1d(16, channels, 3, padding=1))

    def forward(self, x, t):
        return self.net(x + t.view(-1, 1, 1))


def p_losses(model, x_start):
    t = torch.rand(x_start.shape[0])
    noise = torch.randn_like(x_start)
    x_noisy = (1 - t).view(-1, 1, 1) * x_start + t.view(-1, 1, 1) * noise
    return ((model(x_noisy, t) - noise) ** 2).mean()


torch.manual_seed(0)
raw = torch.randn(8, 1, 32)
to_channels = nn.Conv1d(1, 3, kernel_size=1)
with torch.no_grad():
    data = to_channels(raw)
model = Denoiser()
opt = torch.optim.Adam(model.parameters(), lr=1e-4)
for step in range(3):
    loss = p_losses(model, data)
    loss.backward()
    opt.step()
    opt.zero_grad()
