"""Two ReLU(inplace=True) applied one after the other: the second overwrites the output the first one saved.

source: https://github.com/pytorch/pytorch/issues/34429
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn as nn

conv1 = nn.Conv2d(3, 128, kernel_size=1, bias=False)
bn = nn.BatchNorm2d(128)
relu1 = nn.ReLU(inplace = True)
relu2 = nn.ReLU(inplace = True)  # ROOT

torch.manual_seed(0)
input = torch.randn(10, 3, 8, 8)
x = conv1(input)
x = bn(x)
x = relu1(x)

# the second successive inplace ReLU operation
x = relu2(x)

x = x.flatten()
x = torch.sum(x)
x.backward()  # SYMPTOM
