"""The view is taken before the tensor is made to require grad: it is a leaf and gets .grad.

source: https://github.com/pytorch/pytorch/issues/1479
kind: lookalike
verified: b.grad is [[1.], [2.], [3.]]
"""
import torch

a = torch.tensor([1.0, 2.0, 3.0]).view(1, 3)
b = torch.tensor([4.0, 5.0, 6.0]).view(3, 1).requires_grad_()
c = a.mm(b).sum()
c.backward()
print(b.grad)
