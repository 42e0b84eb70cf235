"""Data reshaped by a Conv1d once before the Trainer loop: the second step backwards through it again.

source: https://github.com/lucidrains/denoising-diffusion-pytorch/issues/109
kind: bug
symptom: crash
verified: Trying to backward through the graph a second time
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
data = to_channels(raw)  # ROOT
model = Denoiser()
opt = torch.optim.Adam(list(model.parameters()) + list(to_channels.parameters()), lr=1e-4)
for step in range(3):
    loss = p_losses(model, data)
    loss.backward()  # SYMPTOM
    opt.step()
    opt.zero_grad()
