"""logsumexp over a row that is entirely -inf (everything masked): the gradient is NaN, not zero.

source: https://github.com/pytorch/pytorch/issues/31829
kind: bug
symptom: silent
verified: a.grad is all NaN
"""
import torch


def check(x, fn):
    x.grad = None
    y = fn(x, dim=-1)  # ROOT
    y.backward(torch.ones_like(y))
    return x.grad


a = torch.full((2, 2), -float("inf"), requires_grad=True)
print(check(a, torch.logsumexp))
