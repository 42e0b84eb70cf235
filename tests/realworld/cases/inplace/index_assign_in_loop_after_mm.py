"""forward writes b[i] in place inside a loop while an earlier torch.mm still needs b for backward.

source: https://www.yongfengli.tk/2018/04/13/inplace-operation-in-pytorch.html
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
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
            b[i] = b[i] + 1  # ROOT
            y = y + torch.mm(self.param, b)
        return y


torch.manual_seed(0)
net = Net()
out = net(torch.randn(10, 1))
out.sum().backward()  # SYMPTOM
