"""Per-channel scales gathered with torch.Tensor([p, ...]) silently drop requires_grad.

source: https://github.com/pytorch/pytorch/issues/61410
kind: bug
symptom: silent
verified: every model.scales[i].grad is None, the scales never change
"""
import torch
import torch.nn as nn


class ChannelScale(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.proj = nn.Linear(channels, channels)
        self.scales = nn.ParameterList([nn.Parameter(torch.FloatTensor([1.0])) for _ in range(channels)])

    def forward(self, x):
        s = torch.Tensor([p for p in self.scales])  # ROOT
        return self.proj(x) * s


torch.manual_seed(0)
model = ChannelScale(4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 4), torch.randn(8, 4)
for _ in range(3):
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
print([p.grad for p in model.scales])
