"""Writing one element of a sigmoid output breaks backward, the same formula by hand does not.

source: https://github.com/pytorch/pytorch/issues/9391
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch

a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
b = a.sigmoid()
b[1] = 2  # ROOT
b.sum().backward()  # SYMPTOM
print(a.grad)
