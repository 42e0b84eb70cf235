"""The view of the requires_grad leaf gets its own name (lhs_pos2), so after backward lhs_pos.grad is read on the leaf itself.

source: https://github.com/pytorch/pytorch/issues/32708
kind: lookalike
verified: lhs_pos.grad is 32 ones
"""
import torch

lhs_pos = torch.linspace(1, 32, steps=32, requires_grad=True, dtype=torch.float)
lhs_pos2 = lhs_pos.view(2, 4, 2, 2)
lhs_pos2.sum().backward()
print(lhs_pos.grad)
