"""Silent: the learning rate is 0 (a schedule that never warms up), so nothing ever trains."""
import torch
import torch.nn as nn
import torch.nn.functional as F

model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.0)
x, y = torch.randn(32, 4), torch.randn(32, 1)
for step in range(6):
    opt.zero_grad()
    F.mse_loss(model(x), y).backward()
    opt.step()  # <- cause
