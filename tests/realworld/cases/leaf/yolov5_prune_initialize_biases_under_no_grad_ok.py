"""_initialize_biases with the in-place prior writes into the bias view done under torch.no_grad() (the fix posted in the issue): the detection head gets its objectness and class priors and the model builds.

source: https://github.com/xhwNobody/yolov5_prune_sfp/issues/17
kind: lookalike
"""
import math

import torch
import torch.nn as nn


class Detect(nn.Module):
    def __init__(self, nc=4, ch=(8, 16, 32), stride=(8., 16., 32.)):
        super().__init__()
        self.nc = nc
        self.no = nc + 5
        self.na = 3
        self.m = nn.ModuleList(nn.Conv2d(x, self.no * self.na, 1) for x in ch)
        self.stride = torch.tensor(stride)

    def forward(self, xs):
        return [mi(x) for mi, x in zip(self.m, xs)]


class Model(nn.Module):
    def __init__(self, nc=4):
        super().__init__()
        self.backbone = nn.ModuleList([nn.Conv2d(3, 8, 3, 8, 1), nn.Conv2d(8, 16, 3, 2, 1), nn.Conv2d(16, 32, 3, 2, 1)])
        self.head_self = Detect(nc)
        self._initialize_biases()  # only run once

    def _initialize_biases(self, cf=None):  # initialize biases into Detect(), cf is class frequency
        m = self.head_self  # Detect() module
        for mi, s in zip(m.m, m.stride):  # from
            b = mi.bias.view(m.na, -1)  # conv.bias(255) to (3,85)
            with torch.no_grad():
                b[:, 4] += math.log(8 / (640 / s) ** 2)  # obj (8 objects per 640 image)
                b[:, 5:] += math.log(0.6 / (m.nc - 0.99)) if cf is None else torch.log(cf / cf.sum())  # cls
            mi.bias = torch.nn.Parameter(b.view(-1), requires_grad=True)

    def forward(self, x):
        feats = []
        for conv in self.backbone:
            x = torch.relu(conv(x))
            feats.append(x)
        return self.head_self(feats)


torch.manual_seed(0)
model_dst = Model(nc=4)
outs = model_dst(torch.rand(1, 3, 64, 64))
print([o.shape for o in outs], model_dst.head_self.m[0].bias.view(3, -1)[:, 4])
