"""Silent: zero_grad() is never called, so gradients add up over the steps."""
import torch
import torch.nn as nn
import torch.nn.functional as F

model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(32, 4), torch.randn(32, 1)
for step in range(5):
    loss = F.mse_loss(model(x), y)
    loss.backward()  # <- cause
    opt.step()
