"""ConvBlock stacks ReLU and ReLU(inplace=True) but is only run forward in eval mode, so nothing reads the overwritten saved output.

source: https://github.com/pytorch/torchdynamo/issues/1962
kind: lookalike
verified: the forward runs and prints a [4, 2] output; no backward is taken
"""
import torch
import torch.nn as nn


class ConvBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Sequential(nn.Linear(4, 2), nn.ReLU(), nn.ReLU(inplace=True))

    def forward(self, x):
        return self.block(x)


torch.manual_seed(0)
model = ConvBlock().eval()
x = torch.rand([4, 4])
print(model(x))
