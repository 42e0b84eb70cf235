"""Freezing stage 0 of a detector with requires_grad_(False) on that stage's parameters.

source: https://github.com/ultralytics/yolov3/issues/1301
kind: lookalike
"""
import torch
import torch.nn as nn


class Focus(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(12, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        x = torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]], 1)
        return self.bn(self.conv(x))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(Focus(), nn.Conv2d(8, 4, 1))

    def forward(self, x):
        return self.model(x)


torch.manual_seed(0)
model = Model()
m = model.model[0]
[x.requires_grad_(False) for x in m.parameters()]
print([[x.shape, x.requires_grad] for x in m.parameters()])
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
imgs, targets = torch.randn(2, 3, 8, 8), torch.randn(2, 4, 4, 4)
for _ in range(5):
    optimizer.zero_grad()
    loss = ((model(imgs) - targets) ** 2).mean()
    loss.backward()
    optimizer.step()
