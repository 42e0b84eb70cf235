"""Silent: a layer is defined (and optimized) but never used in forward()."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 8)  # <- cause
        self.out = nn.Linear(8, 1)

    def forward(self, x):
        return self.out(torch.relu(self.fc1(x)))


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 4), torch.randn(32, 1)
for step in range(3):
    opt.zero_grad()
    F.mse_loss(model(x), y).backward()
    opt.step()
