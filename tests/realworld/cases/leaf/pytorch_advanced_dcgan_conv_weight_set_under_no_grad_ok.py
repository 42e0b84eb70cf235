"""The DCGAN notebook's demo weights written inside torch.no_grad() (what nn.init does): autograd does not record the indexed writes into the leaf weights, the layers keep requires_grad=True and the demo convolutions run.

source: https://github.com/YutaroOgawa/pytorch_advanced/issues/160
kind: lookalike
"""
import torch
import torch.nn as nn

print("通常の畳み込み")
m = nn.Conv2d(1, 1, 2, stride=1, bias=False)
with torch.no_grad():
    m.weight[0, 0, 0, 0] = 1
    m.weight[0, 0, 0, 1] = 2
    m.weight[0, 0, 1, 0] = 3
    m.weight[0, 0, 1, 1] = 4
x = torch.arange(1, 10, dtype=torch.float32).view(1, 1, 3, 3)
print(m(x))

print("転置畳み込み")
mt = nn.ConvTranspose2d(1, 1, 2, stride=1, bias=False)
with torch.no_grad():
    mt.weight[0, 0, 0, 0] = 1
    mt.weight[0, 0, 0, 1] = 2
    mt.weight[0, 0, 1, 0] = 3
    mt.weight[0, 0, 1, 1] = 4
print(mt(m(x)))
