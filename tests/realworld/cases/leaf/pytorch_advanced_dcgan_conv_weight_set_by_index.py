"""The book's DCGAN notebook illustrates convolution and transposed convolution by writing chosen values into a fresh layer's weight with m.weight[0, 0, 0, 0] = 1; the weight is a leaf Parameter that requires grad, and an indexed assignment writes in place into a view of it, which autograd refuses on current PyTorch (the notebook was written for v1.0).

source: https://github.com/YutaroOgawa/pytorch_advanced/issues/160
kind: bug
symptom: crash
verified: RuntimeError: a view of a leaf Variable that requires grad is being used in an in-place operation.
"""
import torch
import torch.nn as nn

print("通常の畳み込み")
m = nn.Conv2d(1, 1, 2, stride=1, bias=False)
m.weight[0, 0, 0, 0] = 1  # ROOT
m.weight[0, 0, 0, 1] = 2
m.weight[0, 0, 1, 0] = 3
m.weight[0, 0, 1, 1] = 4
x = torch.arange(1, 10, dtype=torch.float32).view(1, 1, 3, 3)
print(m(x))

print("転置畳み込み")
mt = nn.ConvTranspose2d(1, 1, 2, stride=1, bias=False)
mt.weight[0, 0, 0, 0] = 1
mt.weight[0, 0, 0, 1] = 2
mt.weight[0, 0, 1, 0] = 3
mt.weight[0, 0, 1, 1] = 4
print(mt(m(x)))
