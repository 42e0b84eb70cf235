"""Freezing the first layers but still passing net.parameters() to SGD (once an error in old PyTorch).

source: https://github.com/amdegroot/ssd.pytorch/issues/109
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.optim as optim


class SSDLite(nn.Module):
    def __init__(self):
        super().__init__()
        self.vgg = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1))
        self.loc = nn.Conv2d(8, 4, 1)

    def forward(self, x):
        return self.loc(self.vgg(x))


torch.manual_seed(0)
net = SSDLite()
for layer, param in enumerate(net.parameters()):
    if layer == 1 or layer == 2:
        param.requires_grad = False
    else:
        param.requires_grad = True
optimizer = optim.SGD(net.parameters(), lr=1e-2, momentum=0.9, weight_decay=5e-4)
images, targets = torch.randn(2, 3, 8, 8), torch.randn(2, 4, 8, 8)
for iteration in range(5):
    optimizer.zero_grad()
    loss = ((net(images) - targets) ** 2).mean()
    loss.backward()
    optimizer.step()
