"""Optimizing a plain tensor directly: cte1 and cte2 are constants (requires_grad_(False)), tensor is a leaf created with requires_grad_() and handed to SGD, so output = cte1 @ tensor + cte2 trains it.

source: https://discuss.pytorch.org/t/requires-grad-propagation/93792
kind: lookalike
verified: tensor.grad is set each iteration and tensor changes after every optim.step()
"""
import torch

cte1 = torch.rand(5, 3).requires_grad_(False)
cte2 = torch.rand(5, 5).requires_grad_(False)
tensor = torch.ones(3, 5).requires_grad_()
optim = torch.optim.SGD([tensor], lr=1)
print(f'Initial tensor{tensor}')
for i in range(5):
    optim.zero_grad()
    output = cte1 @ tensor + cte2
    print(f'Requires grad? {output.requires_grad}')
    output.sum().backward()
    optim.step()
print(tensor)
