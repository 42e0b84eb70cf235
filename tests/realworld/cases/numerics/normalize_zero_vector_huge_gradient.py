"""F.normalize of an all-zero vector: the forward is guarded, the gradient is about 1e12.

source: https://github.com/pytorch/pytorch/issues/184575
kind: bug
symptom: silent
verified: x.grad is tensor([1e12, 1e12, 1e12])
"""
import torch
import torch.nn.functional as F

x = torch.zeros(3, requires_grad=True)
y = F.normalize(x, dim=0)  # ROOT
y.sum().backward()
print(f"gradient: {x.grad}")
print(f"grad max: {x.grad.abs().max().item():.3e}")
