"""A BatchNorm layer frozen by requires_grad = False and, as in the issue's workaround, kept in eval mode while its weight does not require grad, so its running statistics stay fixed.

source: https://github.com/pytorch/pytorch/issues/9046
kind: lookalike
verified: running_mean stays 0.0 and running_var 1.0 after training
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
        self.bn.train(self.bn.training and self.bn.weight.requires_grad)
        x = self.bn(self.conv(x))
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
