"""A fused Linear turns gradients off whenever the module is in eval mode: autograd.grad fails.

source: https://github.com/NVIDIA/TransformerEngine/pull/72
kind: bug
symptom: crash
verified: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Linear(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features) * 0.1)
        self.bias = nn.Parameter(torch.zeros(out_features))

    def forward(self, inp):
        with torch.set_grad_enabled(self.training):  # ROOT
            return F.linear(inp, self.weight, self.bias)


torch.manual_seed(0)
inp = torch.randn(2, 2, requires_grad=True)
m = Linear(2, 2).eval()
out = m(inp)
loss = out.mean()
print(torch.autograd.grad(loss, inp))  # SYMPTOM
