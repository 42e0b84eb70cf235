"""The DCGAN notebook with the fix given in the thread: the example values are written through m.weight.data[...], which autograd does not track, so the layers keep requires_grad=True and the demo convolutions run.

source: https://github.com/YutaroOgawa/pytorch_advanced/issues/160
kind: lookalike
"""
import torch
import torch.nn as nn

print("通常の畳み込み")
m = nn.Conv2d(1, 1, 2, stride=1, bias=False)
m.weight.data[0, 0, 0, 0] = 1
m.weight.data[0, 0, 0, 1] = 2
m.weight.data[0, 0, 1, 0] = 3
m.weight.data[0, 0, 1, 1] = 4
x = torch.arange(1, 10, dtype=torch.float32).view(1, 1, 3, 3)
print(m(x))

print("転置畳み込み")
mt = nn.ConvTranspose2d(1, 1, 2, stride=1, bias=False)
mt.weight.data[0, 0, 0, 0] = 1
mt.weight.data[0, 0, 0, 1] = 2
mt.weight.data[0, 0, 1, 0] = 3
mt.weight.data[0, 0, 1, 1] = 4
print(mt(m(x)))
