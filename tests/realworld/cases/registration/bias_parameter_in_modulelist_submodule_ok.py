"""A bias Parameter on a submodule held in a ModuleList: missing from print(model), yet registered and trained.

source: https://github.com/pytorch/pytorch/issues/4761
kind: lookalike
verified: model.layers[0].bias changes after training
"""
import torch
import torch.nn as nn


class AnotherModule(nn.Module):
    def __init__(self, state_len):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(state_len, 8), nn.Linear(8, state_len)])

    def forward(self, x):
        return self.layers[1](torch.relu(self.layers[0](x)))


class MyModule(nn.Module):
    def __init__(self, state_len):
        super().__init__()
        self.bias = nn.Parameter(torch.ones(state_len))
        self.m = AnotherModule(state_len)

    def forward(self, x):
        return self.m(x) + self.bias


class TopModule(nn.Module):
    def __init__(self, state_len=4):
        super().__init__()
        self.layers = nn.ModuleList([MyModule(state_len) for _ in range(2)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


torch.manual_seed(0)
model = TopModule()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 4), torch.randn(8, 4)
for _ in range(3):
    opt.zero_grad()
    ((model(x) - y) ** 2).mean().backward()
    opt.step()
print(model.layers[0].bias)
