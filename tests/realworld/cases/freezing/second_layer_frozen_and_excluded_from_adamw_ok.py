"""Freezing the second layer of a two-layer network: its parameters get requires_grad = False and the AdamW optimizer is given only the first layer (the thread's combined method), so only the first layer trains and the frozen layer accumulates no gradient.

source: https://discuss.pytorch.org/t/freeze-weights-or-constraint-the-optimizer/175455
kind: lookalike
verified: layer 2 keeps .grad None and its values; layer 1 changes every step
"""
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.optim as optim

torch.manual_seed(0)
model = nn.Sequential(OrderedDict([
    ('1', nn.Linear(3, 3)),
    ('2', nn.Linear(3, 3)),
]))
for param in model[1].parameters():
    param.requires_grad = False
optimizer = optim.AdamW(model[0].parameters(), lr=0.0001)
before = model[1].weight.detach().clone()
for step in range(5):
    x, y = torch.randn(8, 3), torch.randn(8, 3)
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(model[1].weight.grad, torch.equal(before, model[1].weight))
