"""Custom autograd.Function computes its forward in NumPy with input.numpy(); forward runs with grad mode off, so the conversion is allowed.

source: https://github.com/pytorch/pytorch/issues/37000
kind: lookalike
"""
import numpy as np
import torch
import torch.nn as nn


class NumpySoftThreshold(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, lam):
        x = input.numpy()
        out = np.sign(x) * np.maximum(np.abs(x) - lam, 0.0)
        ctx.save_for_backward(input)
        ctx.lam = lam
        return torch.from_numpy(out)

    @staticmethod
    def backward(ctx, grad_output):
        input, = ctx.saved_tensors
        return grad_output * (input.abs() > ctx.lam).to(grad_output.dtype), None


torch.manual_seed(0)
layer = nn.Linear(8, 8)
optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
x, y = torch.randn(16, 8), torch.randn(16, 8)
for it in range(3):
    out = NumpySoftThreshold.apply(layer(x), 0.1)
    loss = ((out - y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(loss.item(), layer.weight.grad.abs().sum().item() > 0)
