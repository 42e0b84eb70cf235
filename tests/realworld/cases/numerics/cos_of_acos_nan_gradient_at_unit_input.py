"""An angle computed as torch.acos of a cosine similarity and fed back through torch.cos: for inputs at exactly 1 or -1 the forward value is fine, but acos's derivative -1/sqrt(1 - x^2) is infinite there and the chain rule gives 0 * inf = NaN, which then poisons every gradient upstream.

source: https://discuss.pytorch.org/t/nan-gradient-for-torch-cos-torch-acos/9617
kind: bug
symptom: silent
verified: x.grad is NaN at x = 1 and -inf at x = -1 although cos(acos(x)) == x and the true gradient is 1 everywhere
"""
import torch

x = torch.tensor([1.0, 0.5, -1.0, 0.0], requires_grad=True)
y = torch.cos(torch.acos(x))  # ROOT
y.sum().backward()
print(y.detach(), x.grad)
