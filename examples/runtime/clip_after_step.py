"""Silent: gradients are clipped after optimizer.step(), so the update was never clipped."""
import torch
import torch.nn as nn
import torch.nn.functional as F

model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(32, 4), torch.randn(32, 1)
for step in range(5):
    opt.zero_grad()
    F.mse_loss(model(x), y).backward()
    opt.step()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)  # <- cause
