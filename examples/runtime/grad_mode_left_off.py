"""Crash: an evaluation helper turns grad mode off and never turns it back on."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def evaluate(model, x, y):
    torch.set_grad_enabled(False)  # <- cause
    model.eval()
    return F.mse_loss(model(x), y).item()


model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(16, 4), torch.randn(16, 1)
print("before training:", evaluate(model, x, y))
model.train()
opt.zero_grad()
loss = F.mse_loss(model(x), y)
loss.backward()
opt.step()
