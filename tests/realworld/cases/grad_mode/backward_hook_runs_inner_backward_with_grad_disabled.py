"""A full backward hook builds a small graph and calls backward on it; backward hooks run with grad mode off.

source: https://github.com/pytorch/pytorch/issues/90520
kind: bug
symptom: crash
verified: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn


def hook_out(module, grad_in, grad_out):
    print("backward hook out")
    inp = torch.eye(4, 5, requires_grad=True)
    out = (inp + 1).pow(2).t()  # ROOT
    out.backward(torch.ones_like(out), retain_graph=True)  # SYMPTOM


model_out = nn.Conv2d(3, 3, 1, 1)
input_out = torch.randn([1, 3, 16, 16])
back_hook_out = model_out.register_full_backward_hook(hook_out)
model_out(input_out).sum().backward()
