import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 2)
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, x):
        return self.fc(x) * self.scale


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model.scale = nn.Parameter(torch.ones(1))
for _ in range(3):
    opt.zero_grad()
    model(torch.randn(8, 6)).pow(2).mean().backward()
    opt.step()
