"""L2 normalisation fast path x * min(rsqrt(sum x^2), 1/eps): the guard fixes the value, not the gradient.

source: https://github.com/keras-team/keras/issues/23075
kind: bug
symptom: silent
verified: x.grad is NaN for the all-zero row
"""
import torch


def _normalize(x, axis=-1, epsilon=1e-12):
    square_sum = torch.sum(torch.square(x), dim=axis, keepdim=True)
    inv_norm = torch.rsqrt(square_sum)  # ROOT
    inv_norm = torch.minimum(inv_norm, torch.tensor(1.0 / epsilon))
    return x * inv_norm


x = torch.tensor([[3.0, 4.0], [0.0, 0.0]], requires_grad=True)
_normalize(x).sum().backward()
print(x.grad)
