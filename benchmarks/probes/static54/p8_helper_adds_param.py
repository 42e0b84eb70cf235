import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 2)

    def forward(self, x):
        out = self.fc(x)
        return out * self.scale if hasattr(self, "scale") else out


def add_scale(m):
    m.scale = nn.Parameter(torch.ones(1))  # ROOT


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
add_scale(model)
for _ in range(3):
    opt.zero_grad()
    model(torch.randn(8, 6)).pow(2).mean().backward()
    opt.step()
print("scale moved:", model.scale.item() != 1.0)
