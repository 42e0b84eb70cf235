import torch
import torch.nn as nn

device = torch.device("cpu")


class Scale(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(n)).to(device)  # ROOT
        self.lin = nn.Linear(n, n)

    def forward(self, x):
        return self.lin(x) * self.alpha


m = Scale(3)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
loss = m(torch.randn(2, 3)).sum()
loss.backward()
opt.step()
