"""A byte mask from the options wrapped in nn.Parameter inside a model's __init__.

source: https://github.com/jiasenlu/NeuralBabyTalk/issues/26
kind: bug
symptom: crash
verified: RuntimeError: Only Tensors of floating point and complex dtype can require gradients
"""
import argparse

import torch
import torch.nn as nn
from torch.nn import Parameter


class CascadeCore(nn.Module):
    def __init__(self, opt):
        super().__init__()
        self.fg_mask = Parameter(opt.fg_mask)  # ROOT
        self.fc = nn.Linear(5, 5)

    def forward(self, x):
        return self.fc(x) * self.fg_mask


opt = argparse.Namespace(fg_mask=torch.tensor([1, 0, 1, 1, 0], dtype=torch.uint8))
core = CascadeCore(opt)
core(torch.randn(3, 5)).sum().backward()
