"""Silent: the model is re-created after the optimizer was built; the optimizer keeps updating
the old parameters and the loss never improves."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def build():
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))


model = build()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
model = build()  # <- cause (e.g. re-built after loading a config)
x, y = torch.randn(32, 4), torch.randn(32, 1)
for step in range(5):
    opt.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
