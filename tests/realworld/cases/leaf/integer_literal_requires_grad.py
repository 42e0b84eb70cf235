"""The enable_grad documentation example builds its input from an integer literal.

source: https://github.com/pytorch/pytorch/issues/53466
kind: bug
symptom: crash
verified: RuntimeError: Only Tensors of floating point and complex dtype can require gradients
"""
import torch

x = torch.tensor([1], requires_grad=True)  # ROOT
with torch.no_grad():
    with torch.enable_grad():
        y = x * 2
y.requires_grad
y.backward()
print(x.grad)
