"""Angle between predicted and target directions: acos of a cosine clamped to [-1, 1] still gives NaN.

source: https://github.com/pytorch/pytorch/issues/8069
kind: bug
symptom: silent
verified: net.weight.grad contains NaN once a cosine reaches 1
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
net = nn.Linear(3, 3, bias=False)
with torch.no_grad():
    net.weight.copy_(torch.eye(3))
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
x = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
target = x.clone()
cos = F.cosine_similarity(net(x), target, dim=1).clamp(min=-1, max=1)
angle = torch.acos(cos)  # ROOT
loss = angle.mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()
print(torch.isnan(net.weight.grad).any().item())
