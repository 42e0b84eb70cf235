"""A parameter allocated as nn.Parameter(...) and then moved in __init__ is not enlisted as a network parameter.

source: https://github.com/pytorch/pytorch/issues/20089
kind: bug
symptom: silent
verified: gpu.w is not in gpu.parameters(); it has a grad_fn and never changes
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Gpu(nn.Module):
    def __init__(self):
        super(Gpu, self).__init__()
        self.w = nn.Parameter(torch.ones(10)).double()  # ROOT
        self.fc = nn.Linear(10, 1).double()

    def forward(self, x):
        return self.fc(x * self.w)


torch.manual_seed(0)
gpu = Gpu()
print(list(gpu.named_parameters()))
print(gpu.w.grad_fn)
optimizer = torch.optim.SGD(gpu.parameters(), lr=0.1)
x, y = torch.randn(8, 10, dtype=torch.float64), torch.randn(8, 1, dtype=torch.float64)
for _ in range(5):
    optimizer.zero_grad()
    loss = F.mse_loss(gpu(x), y)
    loss.backward()
    optimizer.step()
