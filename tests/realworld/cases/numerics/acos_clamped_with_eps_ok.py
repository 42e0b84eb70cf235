"""Angle loss with the cosine clamped to [-1 + eps, 1 - eps] before acos: gradients stay finite.

source: https://github.com/banctilrobitaille/torch-vectorized/issues/7
kind: lookalike
verified: net.weight.grad is finite when the cosine is exactly 1
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
eps = 1e-7
net = nn.Linear(3, 3, bias=False)
with torch.no_grad():
    net.weight.copy_(torch.eye(3))
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
x = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
cos = F.cosine_similarity(net(x), x.clone(), dim=1).clamp(-1 + eps, 1 - eps)
loss = torch.acos(cos).mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()
print(torch.isfinite(net.weight.grad).all().item())
