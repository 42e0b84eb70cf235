"""Layers kept in a Python list attribute are missing from net.parameters().

source: https://github.com/pytorch/pytorch/issues/666
kind: bug
symptom: silent
verified: n.list_of_layers[0].weight never changes; print(n) lists only `layer`
"""
import torch
import torch.nn as nn


class net(nn.Module):
    def __init__(self, num_layers):
        super(net, self).__init__()
        self.layer = nn.Linear(1, 1)
        self.list_of_layers = [nn.Linear(1, 1) for i in range(num_layers)]  # ROOT

    def forward(self, x):
        x = self.layer(x)
        for l in self.list_of_layers:
            x = torch.tanh(l(x))
        return x


torch.manual_seed(0)
n = net(4)
print(n)
opt = torch.optim.SGD(n.parameters(), lr=0.1)
x = torch.randn(16, 1)
y = 0.5 * x
for step in range(20):
    opt.zero_grad()
    loss = ((n(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
print(loss.item())
