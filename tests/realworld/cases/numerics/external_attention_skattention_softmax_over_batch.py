"""External-Attention-pytorch's SKAttention stacks the per-kernel attention logits as (k, bs, channel, 1, 1) but normalises them with nn.Softmax(dim=1), across the batch instead of across the k kernel branches.

source: https://github.com/xmu-xiaoma666/External-Attention-pytorch/issues/18
kind: bug
symptom: silent
verified: in eval mode the 3 kernel weights of a channel sum to 0.73 to 0.77 instead of 1, and changing the second image of a batch of 4 changes the first image's output by 0.0087 (max abs); with nn.Softmax(dim=0) the weights sum to 1 and the first output is unchanged (0.0)
"""
from collections import OrderedDict

import torch
import torch.nn as nn


class SKAttention(nn.Module):
    def __init__(self, channel=512, kernels=[1, 3, 5, 7], reduction=16, group=1, L=32):
        super().__init__()
        self.d = max(L, channel // reduction)
        self.convs = nn.ModuleList([])
        for k in kernels:
            self.convs.append(nn.Sequential(OrderedDict([
                ('conv', nn.Conv2d(channel, channel, kernel_size=k, padding=k // 2, groups=group)),
                ('bn', nn.BatchNorm2d(channel)),
                ('relu', nn.ReLU())])))
        self.fc = nn.Linear(channel, self.d)
        self.fcs = nn.ModuleList([nn.Linear(self.d, channel) for _ in kernels])
        self.softmax = nn.Softmax(dim=1)  # ROOT

    def forward(self, x):
        bs, c, _, _ = x.size()
        conv_outs = [conv(x) for conv in self.convs]
        feats = torch.stack(conv_outs, 0)
        U = sum(conv_outs)
        S = U.mean(-1).mean(-1)
        Z = self.fc(S)
        weights = [fc(Z).view(bs, c, 1, 1) for fc in self.fcs]
        attention_weughts = torch.stack(weights, 0)
        attention_weughts = self.softmax(attention_weughts)
        self.last_weights = attention_weughts
        V = (attention_weughts * feats).sum(0)
        return V


torch.manual_seed(0)
model = SKAttention(channel=16, reduction=8, kernels=[1, 3, 5], L=8)
head = nn.Linear(16, 10)
optimizer = torch.optim.SGD(list(model.parameters()) + list(head.parameters()), lr=0.01)
for step in range(3):
    x = torch.randn(4, 16, 8, 8)
    y = torch.randint(0, 10, (4,))
    loss = nn.functional.cross_entropy(head(model(x).mean((2, 3))), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
model.eval()
x = torch.randn(4, 16, 8, 8)
with torch.no_grad():
    out = model(x)
    weight_sums = model.last_weights.sum(0)
    x2 = x.clone()
    x2[1] = torch.randn(16, 8, 8)
    out2 = model(x2)
