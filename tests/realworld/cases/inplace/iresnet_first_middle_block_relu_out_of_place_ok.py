"""The same iResNet blocks with nn.ReLU() (inplace=False, the pull request): out = self.relu(x) leaves x untouched, so identity stays the pre-activation on the main propagation path.

source: https://github.com/iduta/iresnet/pull/2
kind: lookalike
"""
import torch
import torch.nn as nn


class BasicBlock(nn.Module):
    def __init__(self, inplanes, planes, start_block=False, end_block=False, exclude_bn0=False):
        super().__init__()
        if not start_block and not exclude_bn0:
            self.bn0 = nn.BatchNorm2d(inplanes)
        self.conv1 = nn.Conv2d(inplanes, planes, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        if start_block:
            self.bn2 = nn.BatchNorm2d(planes)
        if end_block:
            self.bn2 = nn.BatchNorm2d(planes)
        self.start_block, self.end_block, self.exclude_bn0 = start_block, end_block, exclude_bn0

    def forward(self, x):
        identity = x
        if self.start_block:
            out = self.conv1(x)
        elif self.exclude_bn0:
            out = self.relu(x)
            out = self.conv1(out)
        else:
            out = self.bn0(x)
            out = self.relu(out)
            out = self.conv1(out)
        out = self.bn1(out)
        out = self.relu(out)
        out = self.conv2(out)
        if self.start_block:
            out = self.bn2(out)
        out += identity
        if self.end_block:
            out = self.bn2(out)
            out = self.relu(out)
        return out


torch.manual_seed(0)
model = nn.Sequential(
    BasicBlock(8, 8, start_block=True),
    BasicBlock(8, 8, exclude_bn0=True),
    BasicBlock(8, 8),
    BasicBlock(8, 8, end_block=True),
    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(8, 8, 6, 6), torch.randn(8, 1)
for step in range(15):
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(step, round(loss.item(), 4))
