"""Variational-Dehazing-Networks' `train` loop after the fix: `loss.backward()` runs first and `nn.utils.clip_grad_norm_` then clips the dehazer's and the transmission network's fresh gradients before `optimizer.step()`, so the configured clip (0.01) bounds every update.

source: https://github.com/eunwooim/Variational-Dehazing-Networks/commit/165a8d19efae70b91f5ae97c397b68cd063fba65
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from math import pi

torch.manual_seed(0)
torch.set_num_threads(1)


class UNet(nn.Module):
    def __init__(self, n_channels=3, n_classes=6, c=8):
        super().__init__()
        self.inc = nn.Sequential(nn.Conv2d(n_channels, c, 3, padding=1), nn.ReLU())
        self.down = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(c, 2 * c, 3, padding=1), nn.ReLU())
        self.up = nn.ConvTranspose2d(2 * c, c, 2, stride=2)
        self.outc = nn.Conv2d(2 * c, n_classes, 1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.up(self.down(x1))
        return self.outc(torch.cat([x1, x2], dim=1))


class VHRN(nn.Module):
    def __init__(self):
        super().__init__()
        self.DNet = UNet(n_channels=3, n_classes=6)
        self.TNet = UNet(n_channels=3, n_classes=2)

    def forward(self, x, mode="train"):
        return self.DNet(x), torch.sigmoid(self.TNet(x))


def vlb_loss(inp, d_out, t_out, d_gt, t_gt, A, sigma=1e-2, eps1=1e-2, eps2=1e-2):
    alpha = d_out[:, :3]
    m2 = torch.exp(torch.clamp(d_out[:, 3:], min=-8, max=8))
    beta = t_out[:, :1]
    n2 = torch.exp(torch.clamp(t_out[:, 1:], min=-8, max=8))
    lh = 0.5 * torch.log(torch.tensor(2 * pi * sigma)) + 0.5 * torch.mean((inp - alpha * beta - A * (1 - beta)) ** 2 / sigma + 1)
    kl_dehaze = 0.5 * torch.mean(-torch.log(m2 / eps1) - 1 + m2 / eps1 + (alpha - d_gt) ** 2 / eps1)
    kl_trans = 0.5 * torch.mean(-torch.log(n2 / eps2) - 1 + n2 / eps2 + (beta - t_gt) ** 2 / eps2)
    return lh + kl_dehaze + kl_trans


def total_norm(params):
    return torch.norm(torch.stack([p.grad.norm() for p in params if p.grad is not None])).item()


def train(grad_clip=0.01, steps=20):
    model = VHRN()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(0)
    largest = 0.0
    for step in range(steps):
        clear = torch.rand(4, 3, 16, 16, generator=g)
        trans = torch.rand(4, 1, 16, 16, generator=g) * 0.6 + 0.3
        A = torch.rand(4, 1, 1, 1, generator=g) * 0.3 + 0.7
        hazy = clear * trans + A * (1 - trans)
        model.train()
        optimizer.zero_grad()
        dehaze_est, trans_est = model(hazy, "train")
        loss = vlb_loss(hazy, dehaze_est, trans_est, clear, trans, A)
        loss.backward()
        nn.utils.clip_grad_norm_([p for n, p in model.named_parameters() if "dnet" in n.lower()], grad_clip)
        nn.utils.clip_grad_norm_([p for n, p in model.named_parameters() if "tnet" in n.lower()], grad_clip)
        largest = max(largest, total_norm(model.parameters()))
        optimizer.step()
    print(f"final loss {loss.item():.3f}; largest gradient norm at optimizer.step(): {largest:.4g} (grad_clip {grad_clip})")


train()
