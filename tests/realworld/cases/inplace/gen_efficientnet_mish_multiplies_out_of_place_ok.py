"""gen-efficientnet-pytorch's Mish as kept after the issue: the product is computed out of place, `x.mul(F.softplus(x).tanh())`, even when the layer is built with inplace=True.

source: https://github.com/rwightman/gen-efficientnet-pytorch/issues/16
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def mish(x, inplace: bool = False):
    inner = F.softplus(x).tanh()
    return x.mul(inner)


class Mish(nn.Module):
    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, x):
        return mish(x, self.inplace)


class ConvBnAct(nn.Module):
    def __init__(self, in_chs, out_chs, kernel_size, stride=1, act_layer=Mish):
        super().__init__()
        self.conv = nn.Conv2d(in_chs, out_chs, kernel_size, stride, kernel_size // 2, bias=False)
        self.bn1 = nn.BatchNorm2d(out_chs)
        self.act1 = act_layer(inplace=True)

    def forward(self, x):
        return self.act1(self.bn1(self.conv(x)))


torch.manual_seed(0)
model = nn.Sequential(ConvBnAct(3, 16, 3, stride=2), ConvBnAct(16, 32, 3, stride=2),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
images, targets = torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))
loss = F.cross_entropy(model(images), targets)
optimizer.zero_grad()
loss.backward()
optimizer.step()
