"""pytorch#74874: a reduction copies x, y, z into slots of one zeros buffer and writes each op(tensor[i], tensor[j]) result into a later slot; with op=torch.mul the views tensor[2], tensor[3] saved by the second mul belong to the buffer that `tensor[4] = ...` then writes into (op=torch.add works because add saves nothing).

source: https://github.com/pytorch/pytorch/issues/74874
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
from torch import Tensor


def reduce(x: Tensor, y: Tensor, z: Tensor, op) -> Tensor:
    tensor = torch.zeros((5,), dtype=torch.float32, requires_grad=False)
    tensor[0] = x
    tensor[1] = y
    tensor[3] = z
    tensor[2] = op(tensor[0], tensor[1])
    tensor[4] = op(tensor[2], tensor[3])  # ROOT
    return tensor[4]


torch.manual_seed(0)
inputs = [torch.randn((1,), requires_grad=True) for _ in range(3)]
out = reduce(*inputs, op=torch.add)
grad = torch.autograd.grad(out, inputs, torch.randn_like(out))
out = reduce(*inputs, op=torch.mul)
grad = torch.autograd.grad(out, inputs, torch.randn_like(out))  # SYMPTOM
