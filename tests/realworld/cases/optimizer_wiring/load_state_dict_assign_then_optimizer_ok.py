"""Checkpoint loaded with load_state_dict(assign=True) first; the optimizer is built afterwards.

source: https://github.com/pytorch/tutorials/pull/2522
kind: lookalike
verified: new_m.lin.weight changes during training
"""
import torch
import torch.nn as nn


class SomeModule(nn.Module):
    def __init__(self, size=16):
        super().__init__()
        self.lin = nn.Linear(size, size)
        self.head = nn.Linear(size, 1)

    def forward(self, x):
        return self.head(torch.relu(self.lin(x)))


torch.manual_seed(0)
state_dict = SomeModule().state_dict()
new_m = SomeModule()
new_m.load_state_dict(state_dict, assign=True)
opt = torch.optim.SGD(new_m.parameters(), lr=1e-1)
before = new_m.lin.weight.detach().clone()
x, y = torch.randn(8, 16), torch.randn(8, 1)
for _ in range(3):
    opt.zero_grad()
    loss = ((new_m(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
print(torch.equal(before, new_m.lin.weight.detach()))
