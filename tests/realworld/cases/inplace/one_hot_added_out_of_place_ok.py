"""forward adds a one-hot vector out of place instead of writing b[i]: backward works.

source: https://www.yongfengli.tk/2018/04/13/inplace-operation-in-pytorch.html
kind: lookalike
verified: backward runs, net.param.grad is set
"""
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.param = nn.Parameter(torch.randn(10, 10) * 0.1)

    def forward(self, a):
        y = 0
        b = torch.mm(self.param, a)
        for i in range(10):
            bione = torch.zeros(10, 1)
            bione[i] = 1
            b = b + bione
            y = y + torch.mm(self.param, b)
        return y


torch.manual_seed(0)
net = Net()
out = net(torch.randn(10, 1))
out.sum().backward()
print(net.param.grad is not None)
