"""Residual unit keeps the identity and adds it in place into the batch-norm output: backward works.

source: https://discuss.pytorch.org/t/in-place-operation-and-resnet/10724
kind: lookalike
verified: backward runs, conv_1.weight.grad is set
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ResidualUnitB(nn.Module):
    def __init__(self):
        super(ResidualUnitB, self).__init__()
        self.conv_0 = nn.Conv2d(3, 24, 3, padding=1, bias=False)
        self.bn_0 = nn.BatchNorm2d(24)
        self.conv_1 = nn.Conv2d(24, 24, 3, padding=1, bias=False)
        self.bn_1 = nn.BatchNorm2d(24)

    def forward(self, x):
        x = self.conv_0(x)
        x = self.bn_0(x)
        x = F.relu(x, inplace=True)
        identity = x
        x = self.conv_1(x)
        x = self.bn_1(x)
        x += identity
        x = F.relu(x, inplace=True)
        return x


torch.manual_seed(0)
unit = ResidualUnitB()
out = unit(torch.randn(2, 3, 8, 8))
out.mean().backward()
print(unit.conv_1.weight.grad is not None)
