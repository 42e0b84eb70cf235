"""AdderNet's adder Function computes both gradients in backward but never returns them.

source: https://github.com/huawei-noah/AdderNet/issues/21
kind: bug
symptom: crash
verified: RuntimeError: function adderBackward returned an incorrect number of gradients (expected 2, got 1)
"""
import torch
import torch.nn as nn
from torch.autograd import Function

torch.manual_seed(0)


class adder(Function):
    @staticmethod
    def forward(ctx, W_col, X_col):
        ctx.save_for_backward(W_col, X_col)
        return -(W_col.unsqueeze(2) - X_col.unsqueeze(0)).abs().sum(1)

    @staticmethod
    def backward(ctx, grad_output):  # ROOT
        W_col, X_col = ctx.saved_tensors
        diff = X_col.unsqueeze(0) - W_col.unsqueeze(2)
        grad_W_col = (diff * grad_output.unsqueeze(1)).sum(2)
        grad_W_col = grad_W_col / grad_W_col.norm(p=2).clamp(min=1e-12) * 0.2
        grad_X_col = (-diff.clamp(-1, 1) * grad_output.unsqueeze(1)).sum(0)


class Adder2D(nn.Module):
    def __init__(self, in_features=6, out_features=3):
        super().__init__()
        self.adder = nn.Parameter(torch.randn(out_features, in_features))

    def forward(self, x_col):
        return adder.apply(self.adder, x_col)


layer = Adder2D()
out = layer(torch.randn(6, 5))
loss = out.pow(2).mean()
loss.backward()  # SYMPTOM
