"""sobel-operator-pytorch's Sobel with the squared gradient magnitude clamped away from zero before torch.sqrt (the clamp the mmrotate and arcface threads use for the same reason): on flat regions the derivative is finite, so the edge loss on a flat gray canvas trains.

source: https://github.com/chaddy1004/sobel-operator-pytorch/issues/1
kind: lookalike
"""
import torch
from torch import nn
import torch.nn.functional as F


class Sobel(nn.Module):
    def __init__(self):
        super().__init__()
        self.filter = nn.Conv2d(in_channels=1, out_channels=2, kernel_size=3, stride=1, padding=0, bias=False)

        Gx = torch.tensor([[2.0, 0.0, -2.0], [4.0, 0.0, -4.0], [2.0, 0.0, -2.0]])
        Gy = torch.tensor([[2.0, 4.0, 2.0], [0.0, 0.0, 0.0], [-2.0, -4.0, -2.0]])
        G = torch.cat([Gx.unsqueeze(0), Gy.unsqueeze(0)], 0)
        G = G.unsqueeze(1)
        self.filter.weight = nn.Parameter(G, requires_grad=False)

    def forward(self, img):
        x = self.filter(img)
        x = torch.mul(x, x)
        x = torch.sum(x, dim=1, keepdim=True)
        x = torch.sqrt(x.clamp(min=1e-8))
        return x


torch.manual_seed(0)
sobel = Sobel()
target = torch.zeros(1, 1, 64, 64)
target[..., 16:48, 16:48] = 1.0
target = target + 0.05 * torch.randn_like(target)
canvas = nn.Parameter(torch.full((1, 1, 64, 64), 0.5))
optimizer = torch.optim.Adam([canvas], lr=0.05)
for step in range(30):
    loss = F.l1_loss(canvas, target) + 0.1 * F.l1_loss(sobel(canvas), sobel(target))
    optimizer.zero_grad()
    loss.backward()
    if step == 0:
        print("first loss", loss.item(), "nan grads", torch.isnan(canvas.grad).sum().item(), "of", canvas.numel())
    optimizer.step()
print("last loss", loss.item(), "canvas nan", torch.isnan(canvas).all().item())
