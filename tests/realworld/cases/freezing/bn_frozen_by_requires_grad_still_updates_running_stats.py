"""A BatchNorm layer "frozen" by setting requires_grad = False on its parameters keeps updating running_mean and running_var in training mode, so the frozen pretrained statistics drift with the new data.

source: https://github.com/pytorch/pytorch/issues/9046
kind: bug
symptom: silent
verified: after 10 training steps on data with mean 2 the frozen BatchNorm's weight and bias are unchanged but its running_mean moved from 0.0 to 0.56 (max abs) and running_var from 1.0 to at most 0.85; with self.bn.train(self.bn.training and self.bn.weight.requires_grad) (the issue's workaround) both stay at their pretrained values
"""
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        x = self.bn(self.conv(x))  # ROOT
        return self.head(torch.relu(x).mean((2, 3)))


torch.manual_seed(0)
model = Net()
for param in model.bn.parameters():
    param.requires_grad = False
optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.01)
model.train()
for step in range(10):
    x = torch.randn(4, 3, 8, 8) + 2
    y = torch.randint(0, 2, (4,))
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(model.bn.running_mean.abs().max().item(), model.bn.running_var.max().item())
