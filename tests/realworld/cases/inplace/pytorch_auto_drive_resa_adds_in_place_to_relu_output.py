"""pytorch-auto-drive's RESA layer aggregates features with y = x and then y.add_(...) in its shift loops: x is the ReLU output of the backbone, which ReLU's backward needs, so the in-place add changes a tensor saved for the backward and training fails at loss.backward().

source: https://github.com/voldemortX/pytorch-auto-drive/pull/139
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import math

import torch
from torch import nn as nn
from torch.nn import functional as F


class RESA(nn.Module):
    # REcurrent Feature-Shift Aggregator in RESA paper

    def __init__(self, num_channels=128, iteration=5, alpha=2.0, trace_arg=None, os=8):
        super(RESA, self).__init__()
        self.iteration = iteration
        self.alpha = alpha
        self.conv_d = nn.ModuleList(nn.Conv2d(num_channels, num_channels, (1, 9), padding=(0, 4), bias=False)
                                    for _ in range(iteration))
        self.conv_u = nn.ModuleList(nn.Conv2d(num_channels, num_channels, (1, 9), padding=(0, 4), bias=False)
                                    for _ in range(iteration))
        self.conv_r = nn.ModuleList(nn.Conv2d(num_channels, num_channels, (9, 1), padding=(4, 0), bias=False)
                                    for _ in range(iteration))
        self.conv_l = nn.ModuleList(nn.Conv2d(num_channels, num_channels, (9, 1), padding=(4, 0), bias=False)
                                    for _ in range(iteration))
        self._adjust_initializations(num_channels=num_channels)

    def _adjust_initializations(self, num_channels=128):
        bound = math.sqrt(2.0 / (num_channels * 9 * 5))
        for i in list(self.conv_d) + list(self.conv_u) + list(self.conv_r) + list(self.conv_l):
            nn.init.uniform_(i.weight, -bound, bound)

    def forward(self, x):  # the TensorRT (is_tracing) branches are left out
        y = x
        h, w = y.shape[-2:]
        if 2 ** self.iteration > min(h, w):
            print('Too many iterations for RESA, your image size may be too small.')
        # Down
        for i in range(self.iteration):
            idx = (torch.arange(h) + h // 2 ** (self.iteration - i)) % h
            y.add_(self.alpha * F.relu(self.conv_d[i](y[:, :, idx, :])))  # ROOT
        # Up (this and the two loops below are written out of place here, as the fix writes them)
        for i in range(self.iteration):
            idx = (torch.arange(h) - h // 2 ** (self.iteration - i)) % h
            y = y + (self.alpha * F.relu(self.conv_u[i](y[:, :, idx, :])))
        # Right
        for i in range(self.iteration):
            idx = (torch.arange(w) + w // 2 ** (self.iteration - i)) % w
            y = y + (self.alpha * F.relu(self.conv_r[i](y[:, :, :, idx])))
        # Left
        for i in range(self.iteration):
            idx = (torch.arange(w) - w // 2 ** (self.iteration - i)) % w
            y = y + (self.alpha * F.relu(self.conv_l[i](y[:, :, :, idx])))

        return y


class LaneNet(nn.Module):  # backbone (conv + ReLU) -> RESA -> lane segmentation head
    def __init__(self, num_channels=8, num_classes=5):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, num_channels, 3, padding=1), nn.ReLU())
        self.reducer = RESA(num_channels=num_channels, iteration=3)
        self.head = nn.Conv2d(num_channels, num_classes, 1)

    def forward(self, images):
        return self.head(self.reducer(self.backbone(images)))


torch.manual_seed(0)
net = LaneNet()
optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
images, labels = torch.randn(2, 3, 16, 16), torch.randint(0, 5, (2, 16, 16))
loss = F.cross_entropy(net(images), labels)
optimizer.zero_grad()
loss.backward()  # SYMPTOM
optimizer.step()
print("loss", loss.item())
