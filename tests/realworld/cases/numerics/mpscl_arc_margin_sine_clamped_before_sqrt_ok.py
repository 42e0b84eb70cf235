"""MPSCL arc-margin head with the maintainer's fix: sine = sqrt((1 - cosine^2).clamp(0.0001, 1.0)), so a feature aligned exactly with its class weight (cosine = 1) gives a finite gradient.

source: https://github.com/TFboys-lzz/MPSCL/issues/2
kind: lookalike
verified: the gradients are finite when one sample's feature equals its class weight direction
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class ArcMarginProduct(nn.Module):
    def __init__(self, in_features, out_features, s=30.0, m=0.50):
        super(ArcMarginProduct, self).__init__()
        self.s, self.m = s, m
        self.weight = nn.Parameter(torch.FloatTensor(out_features, in_features))
        nn.init.xavier_uniform_(self.weight)
        self.cos_m, self.sin_m = math.cos(m), math.sin(m)
        self.th, self.mm = math.cos(math.pi - m), math.sin(math.pi - m) * m

    def forward(self, input, label):
        cosine = F.linear(F.normalize(input), F.normalize(self.weight))
        sine = torch.sqrt((1.0 - torch.pow(cosine, 2)).clamp(0.0001, 1.0))
        phi = cosine * self.cos_m - sine * self.sin_m
        phi = torch.where(cosine > self.th, phi, cosine - self.mm)
        one_hot = torch.zeros_like(cosine).scatter_(1, label.view(-1, 1).long(), 1)
        return ((one_hot * phi) + ((1.0 - one_hot) * cosine)) * self.s


torch.manual_seed(0)
head = ArcMarginProduct(4, 3)
features = torch.randn(3, 4)
with torch.no_grad():
    features[0] = head.weight[1] * 2.0
features.requires_grad_(True)
label = torch.tensor([1, 0, 2])
loss = F.cross_entropy(head(features, label), label)
loss.backward()
print(torch.isfinite(features.grad).all().item(), torch.isfinite(head.weight.grad).all().item())
