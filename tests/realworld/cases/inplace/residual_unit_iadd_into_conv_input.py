"""Residual unit adds the residual in place into x, the input conv_1 saved for its backward.

source: https://discuss.pytorch.org/t/in-place-operation-and-resnet/10724
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ResidualUnitA(nn.Module):
    def __init__(self):
        super(ResidualUnitA, self).__init__()
        self.conv_0 = nn.Conv2d(3, 24, 3, padding=1, bias=False)
        self.bn_0 = nn.BatchNorm2d(24)
        self.conv_1 = nn.Conv2d(24, 24, 3, padding=1, bias=False)
        self.bn_1 = nn.BatchNorm2d(24)

    def forward(self, x):
        x = self.conv_0(x)
        x = self.bn_0(x)
        x = F.relu(x, inplace=True)
        residual = self.conv_1(x)
        residual = self.bn_1(residual)
        x += residual  # ROOT
        x = F.relu(x, inplace=True)
        return x


torch.manual_seed(0)
unit = ResidualUnitA()
out = unit(torch.randn(2, 3, 8, 8))
out.mean().backward()  # SYMPTOM
