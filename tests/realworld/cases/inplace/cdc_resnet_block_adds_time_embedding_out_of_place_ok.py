"""CDC compression ResnetBlock with the reported fix: h = h + self.mlp(time_emb)[:, :, None, None] builds a new tensor, so the ReLU output saved for backward is untouched.

source: https://github.com/buggyyang/CDC_compression/issues/1
kind: lookalike
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class LayerNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.g = nn.Parameter(torch.ones(1, dim, 1, 1))
        self.b = nn.Parameter(torch.zeros(1, dim, 1, 1))

    def forward(self, x):
        var = torch.var(x, dim=1, unbiased=False, keepdim=True)
        mean = torch.mean(x, dim=1, keepdim=True)
        return (x - mean) / (var + self.eps).sqrt() * self.g + self.b


class Block(nn.Module):
    def __init__(self, dim, dim_out):
        super().__init__()
        self.block = nn.Sequential(nn.Conv2d(dim, dim_out, 3, padding=1), LayerNorm(dim_out), nn.ReLU())

    def forward(self, x):
        return self.block(x)


class ResnetBlock(nn.Module):
    def __init__(self, dim, dim_out, time_emb_dim=None):
        super().__init__()
        self.mlp = nn.Sequential(nn.LeakyReLU(0.2), nn.Linear(time_emb_dim, dim_out)) if time_emb_dim is not None else None
        self.block1 = Block(dim, dim_out)
        self.block2 = Block(dim_out, dim_out)
        self.res_conv = nn.Conv2d(dim, dim_out, 1) if dim != dim_out else nn.Identity()

    def forward(self, x, time_emb=None):
        h = self.block1(x)
        if time_emb is not None:
            h = h + self.mlp(time_emb)[:, :, None, None]
        h = self.block2(h)
        return h + self.res_conv(x)


def sinusoidal_pos_emb(t, dim):
    half_dim = dim // 2
    emb = math.log(10000) / (half_dim - 1)
    emb = torch.exp(torch.arange(half_dim) * -emb)
    emb = t[:, None] * emb[None, :]
    return torch.cat((emb.sin(), emb.cos()), dim=-1)


torch.manual_seed(0)
denoise_fn = ResnetBlock(3, 16, time_emb_dim=8)
head = nn.Conv2d(16, 3, 1)
optimizer = torch.optim.Adam(list(denoise_fn.parameters()) + list(head.parameters()), lr=1e-4)
for step in range(2):
    x_start = torch.randn(2, 3, 16, 16)
    t = torch.randint(0, 1000, (2,)).float()
    noise = torch.randn_like(x_start)
    x_noisy = x_start + noise
    loss = F.mse_loss(head(denoise_fn(x_noisy, sinusoidal_pos_emb(t, 8))), noise)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
