"""sobel-operator-pytorch's Sobel.forward returns torch.sqrt(Gx^2 + Gy^2) with no epsilon: wherever the image is flat the magnitude is exactly 0, the derivative of sqrt there is infinite and multiplies a zero, so an edge loss built on it gives NaN gradients; here a canvas initialized to flat gray and fitted to a target with an L1 + edge loss turns NaN after the first Adam step while the loss printed at that step is finite.

source: https://github.com/chaddy1004/sobel-operator-pytorch/issues/1
kind: bug
symptom: silent
verified: the first loss prints 0.5922 while 4096 of 4096 canvas gradients are NaN, and after 30 Adam steps the canvas is all NaN and the loss nan; with the epsilon inside the sqrt (the issue's fix, 1e-6) no gradient is NaN and the loss goes 0.5921 -> 0.0411
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
        x = torch.sqrt(x)  # ROOT
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
