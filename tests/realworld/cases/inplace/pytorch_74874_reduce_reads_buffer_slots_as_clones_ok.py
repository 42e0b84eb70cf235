"""pytorch#74874 reduction with the operands read as clones, `op(tensor[i].clone(), tensor[j].clone())`, so what torch.mul saves for backward is not a view of the buffer the next slot assignment writes into.

source: https://github.com/pytorch/pytorch/issues/74874
kind: lookalike
verified: with op=torch.mul the gradients equal those of x * y * z computed directly
"""
import torch
from torch import Tensor


def reduce(x: Tensor, y: Tensor, z: Tensor, op) -> Tensor:
    tensor = torch.zeros((5,), dtype=torch.float32, requires_grad=False)
    tensor[0] = x
    tensor[1] = y
    tensor[3] = z
    tensor[2] = op(tensor[0].clone(), tensor[1].clone())
    tensor[4] = op(tensor[2].clone(), tensor[3].clone())
    return tensor[4]


torch.manual_seed(0)
inputs = [torch.randn((1,), requires_grad=True) for _ in range(3)]
out = reduce(*inputs, op=torch.add)
grad = torch.autograd.grad(out, inputs, torch.randn_like(out))
out = reduce(*inputs, op=torch.mul)
g = torch.randn_like(out)
grad = torch.autograd.grad(out, inputs, g)
expected = torch.autograd.grad((inputs[0] * inputs[1] * inputs[2]).squeeze(0), inputs, g)
assert all(torch.allclose(a, b) for a, b in zip(grad, expected))
