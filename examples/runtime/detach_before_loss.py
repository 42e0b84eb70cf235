"""Crash: `.detach()` on the model output cuts the graph; backward() then has nothing to do."""
import torch
import torch.nn as nn
import torch.nn.functional as F

model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 4), torch.randn(32, 1)
for step in range(3):
    opt.zero_grad()
    pred = model(x).detach()  # <- cause
    loss = F.mse_loss(pred, y)
    loss.backward()
    opt.step()
