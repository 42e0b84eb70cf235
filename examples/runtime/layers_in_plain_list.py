"""Silent: hidden layers kept in a plain Python list are not registered, so the optimizer
built from model.parameters() never updates them (they still get gradients)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = [nn.Linear(8, 8) for _ in range(2)]  # <- cause (use nn.ModuleList)
        self.out = nn.Linear(8, 1)

    def forward(self, x):
        for block in self.blocks:
            x = torch.relu(block(x))
        return self.out(x)


model = MLP()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 8), torch.randn(32, 1)
for step in range(5):
    opt.zero_grad()
    F.mse_loss(model(x), y).backward()
    opt.step()
