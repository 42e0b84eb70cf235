"""A byte mask from the options kept as a Parameter that does not require grad.

source: https://github.com/jiasenlu/NeuralBabyTalk/issues/26
kind: lookalike
verified: core.fc.weight changes after one step and the mask is untouched
"""
import argparse

import torch
import torch.nn as nn
from torch.nn import Parameter

torch.manual_seed(0)


class CascadeCore(nn.Module):
    def __init__(self, opt):
        super().__init__()
        self.fg_mask = Parameter(opt.fg_mask, requires_grad=False)
        self.fc = nn.Linear(5, 5)

    def forward(self, x):
        return self.fc(x) * self.fg_mask


opt = argparse.Namespace(fg_mask=torch.tensor([1, 0, 1, 1, 0], dtype=torch.uint8))
core = CascadeCore(opt)
optimizer = torch.optim.SGD([p for p in core.parameters() if p.requires_grad], lr=0.1)
before = core.fc.weight.detach().clone()
core(torch.randn(3, 5)).sum().backward()
optimizer.step()
print(not torch.equal(before, core.fc.weight))
