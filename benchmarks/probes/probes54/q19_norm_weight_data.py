import torch
import torch.nn as nn


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        rms = x.pow(2).mean(-1, keepdim=True).add(self.eps).rsqrt()
        return x * rms * self.weight.data  # ROOT


block = nn.Sequential(nn.Linear(8, 8), RMSNorm(8), nn.Linear(8, 1))
opt = torch.optim.AdamW(block.parameters(), lr=1e-2)
before = block[1].weight.clone()
for _ in range(3):
    x, y = torch.randn(16, 8), torch.randn(16, 1)
    loss = (block(x) - y).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("norm weight moved:", not torch.equal(before, block[1].weight))
