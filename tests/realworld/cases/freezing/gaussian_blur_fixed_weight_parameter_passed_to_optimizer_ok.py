"""A Gaussian blur layer keeps its fixed kernel as nn.Parameter(..., requires_grad=False) and the whole model.parameters() goes to SGD: the optimizer skips the kernel (its .grad stays None), so it stays fixed while the conv after it trains.

source: https://github.com/pytorch/pytorch/issues/679
kind: lookalike
verified: after 3 SGD steps the blur weight is unchanged (0.0) and conv.weight moved
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class GaussianBlur(nn.Module):
    def __init__(self, kernelSize=5, sigma=1):
        super(GaussianBlur, self).__init__()
        self.weight = nn.Parameter(self._calculate_weights(kernelSize, sigma), requires_grad=False)

    @staticmethod
    def _calculate_weights(kernelSize, sigma):
        r = torch.arange(kernelSize, dtype=torch.float32) - (kernelSize - 1) / 2
        g = torch.exp(-r ** 2 / (2 * sigma ** 2)) / (math.sqrt(2 * math.pi) * sigma)
        k = torch.outer(g, g)
        return (k / k.sum()).view(1, 1, kernelSize, kernelSize)

    def forward(self, x):
        return F.conv2d(x, self.weight, padding=self.weight.shape[-1] // 2)


torch.manual_seed(0)
model = nn.Sequential(GaussianBlur(), nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 1, 3, padding=1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
blur_before = model[0].weight.clone()
conv_before = model[1].weight.detach().clone()
for _ in range(3):
    x, target = torch.randn(4, 1, 16, 16), torch.randn(4, 1, 16, 16)
    loss = F.mse_loss(model(x), target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print((model[0].weight - blur_before).abs().max().item(), (model[1].weight - conv_before).abs().max().item())
