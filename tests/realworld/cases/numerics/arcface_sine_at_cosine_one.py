"""ArcFace margin product: sine = sqrt(1 - cosine^2) has a NaN gradient when a cosine reaches 1.

source: https://github.com/ronghuaiyang/arcface-pytorch/issues/68
kind: bug
symptom: silent
verified: metric_fc.weight.grad contains NaN
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class ArcMarginProduct(nn.Module):
    def __init__(self, in_features, out_features, s=30.0, m=0.50):
        super().__init__()
        self.weight = nn.Parameter(torch.FloatTensor(out_features, in_features))
        nn.init.xavier_uniform_(self.weight)
        self.s, self.cos_m, self.sin_m = s, math.cos(m), math.sin(m)

    def forward(self, input, label):
        cosine = F.linear(F.normalize(input), F.normalize(self.weight))
        sine = torch.sqrt(1.0 - torch.pow(cosine, 2))  # ROOT
        phi = cosine * self.cos_m - sine * self.sin_m
        one_hot = F.one_hot(label, cosine.size(1)).float()
        return self.s * (one_hot * phi + (1.0 - one_hot) * cosine)


metric_fc = ArcMarginProduct(4, 3)
with torch.no_grad():
    metric_fc.weight[1] = torch.tensor([1.0, 0.0, 0.0, 0.0])
feature = torch.tensor([[2.0, 0.0, 0.0, 0.0]])  # a feature exactly on its class centre
output = metric_fc(feature, torch.tensor([1]))
loss = F.cross_entropy(output, torch.tensor([1]))
loss.backward()
print(torch.isnan(metric_fc.weight.grad).any().item())
