"""The same checkpointed Linear on plain input data with use_reentrant=False: the non-reentrant checkpoint records the graph through m's weights, so the output requires grad and the loss trains m.

source: https://github.com/pytorch/pytorch/issues/7617
kind: lookalike
verified: z1.requires_grad is True and m.weight.grad is set after backward
"""
import torch
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
m = torch.nn.Linear(4, 3)
optimizer = torch.optim.SGD(m.parameters(), lr=0.1)
x = torch.randn(10, 4)
y = torch.randn(10, 3)

z1 = checkpoint(lambda _: m(_), x, use_reentrant=False)
print(z1.requires_grad)
z2 = m(x)
print(z2.requires_grad)

loss = ((z1 - y) ** 2).mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()
