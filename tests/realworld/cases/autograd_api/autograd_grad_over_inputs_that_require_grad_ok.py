"""torch.autograd.grad of c = a @ b is taken only with respect to b, the input that requires grad.

source: https://github.com/pytorch/pytorch/issues/115918
kind: lookalike
"""
import torch

a = torch.tensor([1.0, 2.0])
b = torch.tensor([3., 4.], requires_grad=True)
c = a @ b
inputs = [t for t in (a, b) if t.requires_grad]
grads = torch.autograd.grad(c, inputs, allow_unused=True)
assert torch.equal(grads[0], a)
