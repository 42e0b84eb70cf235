"""`lhs_pos = lhs_pos.view(2, 4, 2, 2)` rebinds the name of a requires_grad leaf to its view; after backward `lhs_pos.grad` is read on the view, a non-leaf, and is None while the original leaf did get its gradient.

source: https://github.com/pytorch/pytorch/issues/32708
kind: bug
symptom: silent
verified: lhs_pos.grad is None after backward (torch warns about reading .grad of a non-leaf); viewing into lhs_pos2 instead gives lhs_pos.grad of 32 ones
"""
import torch

lhs_pos = torch.linspace(1, 32, steps=32, requires_grad=True, dtype=torch.float)
lhs_pos = lhs_pos.view(2, 4, 2, 2)  # ROOT
lhs_pos.sum().backward()
print(lhs_pos.grad)
