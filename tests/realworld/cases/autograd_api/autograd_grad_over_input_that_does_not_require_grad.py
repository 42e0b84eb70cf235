"""torch.autograd.grad is asked for the gradient of c = a @ b with respect to [a, b], but a does not require grad; allow_unused=True does not cover it.

source: https://github.com/pytorch/pytorch/issues/115918
kind: bug
symptom: crash
verified: RuntimeError: One of the differentiated Tensors does not require grad
"""
import torch

a = torch.tensor([1.0, 2.0])
b = torch.tensor([3., 4.], requires_grad=True)
c = a @ b
grads = torch.autograd.grad(c, [a, b], allow_unused=True)  # ROOT
