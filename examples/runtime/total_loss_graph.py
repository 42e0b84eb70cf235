"""Silent: `total_loss += loss` keeps every step's graph alive (memory grows each step)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(32, 4), torch.randn(32, 1)
total_loss = 0
for step in range(5):
    opt.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    total_loss += loss  # <- cause
print(float(total_loss) / 5)
