import torch
import torch.nn as nn


class ContrastiveDistance(nn.Module):
    def __init__(self, margin=1.0):
        super().__init__()
        self.margin = margin

    def forward(self, a, b, same):
        d2 = ((a - b) ** 2).sum(-1)
        dist = torch.where(d2 > 0, d2.sqrt(), torch.zeros_like(d2))  # ROOT
        pos = same * dist ** 2
        neg = (1 - same) * torch.clamp(self.margin - dist, min=0) ** 2
        return (pos + neg).mean()


enc = nn.Linear(4, 3)
crit = ContrastiveDistance()
opt = torch.optim.SGD(enc.parameters(), lr=0.1)
x = torch.randn(6, 4)
pairs = torch.cat([x[:3], x[:3]])
other = torch.cat([x[:3], torch.randn(3, 4)])
same = torch.tensor([1.0, 1, 1, 0, 0, 0])
loss = crit(enc(pairs), enc(other), same)
opt.zero_grad()
loss.backward()
print("nan grad:", torch.isnan(enc.weight.grad).any().item())
opt.step()
