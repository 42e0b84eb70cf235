"""A side branch reads conv1's output, then the main branch adds into that output in place.

source: https://discuss.pytorch.org/t/when-would-the-error-one-of-the-variables-needed-for-gradient-computation-has-been-modified-occur/11976/2
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn as nn


class TwoBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv1_p = nn.Conv2d(8, 8, 1)
        self.some_layer = nn.Conv2d(3, 8, 1)

    def forward(self, input):
        x = self.conv1(input)  # main branch
        x_p = self.conv1_p(x)  # another branch
        x += self.some_layer(input)  # ROOT
        return x, x_p


torch.manual_seed(0)
net = TwoBranch()
x, x_p = net(torch.randn(2, 3, 8, 8))
(x.mean() + x_p.mean()).backward()  # SYMPTOM
