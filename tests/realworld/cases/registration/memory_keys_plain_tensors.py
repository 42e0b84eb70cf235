"""The memory module's keys and values are plain random tensors, not nn.Parameter, and never learn.

source: https://github.com/SimonThomine/RememberingNormality/issues/7
kind: bug
symptom: silent
verified: mem.keys and mem.values keep their random initial values; not in mem.parameters()
"""
import torch
import torch.nn as nn


class MemoryModule(nn.Module):
    def __init__(self, L, channel):
        super().__init__()
        self.keys = torch.randn(L, channel).to('cpu')  # ROOT
        self.values = torch.randn(L, channel).to('cpu')
        self.proj = nn.Linear(channel, channel)

    def forward(self, x):
        q = self.proj(x)
        attn = torch.softmax(q @ self.keys.t(), dim=-1)
        return attn @ self.values


torch.manual_seed(0)
mem = MemoryModule(L=10, channel=8)
optimizer = torch.optim.Adam(mem.parameters(), lr=1e-2)
x = torch.randn(16, 8)
for _ in range(10):
    optimizer.zero_grad()
    loss = ((mem(x) - x) ** 2).mean()
    loss.backward()
    optimizer.step()
