import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(5, 5)
        self.fc = nn.Linear(5, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.body(x)))


model = Net()
params = list(model.parameters())
model.fc = nn.Linear(5, 3)  # ROOT
opt = torch.optim.Adam(params, lr=1e-3)
for _ in range(3):
    loss = nn.functional.cross_entropy(model(torch.randn(4, 5)), torch.randint(0, 3, (4,)))
    opt.zero_grad()
    loss.backward()
    opt.step()
