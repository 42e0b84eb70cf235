"""A full backward hook builds its small graph under torch.enable_grad() before calling backward on it.

source: https://github.com/pytorch/pytorch/issues/90520
kind: lookalike
"""
import torch
import torch.nn as nn


def hook_out(module, grad_in, grad_out):
    print("backward hook out")
    inp = torch.eye(4, 5, requires_grad=True)
    with torch.enable_grad():
        out = (inp + 1).pow(2).t()
        out.backward(torch.ones_like(out), retain_graph=True)
    print(inp.grad.sum())


model_out = nn.Conv2d(3, 3, 1, 1)
input_out = torch.randn([1, 3, 16, 16])
back_hook_out = model_out.register_full_backward_hook(hook_out)
model_out(input_out).sum().backward()
