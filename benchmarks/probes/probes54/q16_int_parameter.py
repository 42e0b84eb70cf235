import torch
import torch.nn as nn


class LearnedShift(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = nn.Linear(n, n)
        self.shift = nn.Parameter(torch.arange(n))  # ROOT

    def forward(self, x):
        return self.lin(x) + self.shift


m = LearnedShift(4)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
loss = m(torch.randn(2, 4)).pow(2).mean()
loss.backward()
opt.step()
