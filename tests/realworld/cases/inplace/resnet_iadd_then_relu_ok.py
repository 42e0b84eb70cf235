"""torchvision ResNet block: out += identity, then the in-place ReLU; safe as written.

source: https://github.com/pytorch/vision/pull/579
kind: lookalike
verified: every parameter of the block gets a gradient
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class BasicBlock(nn.Module):
    def __init__(self, planes=4):
        super().__init__()
        self.conv1 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        out = self.relu(out)
        return out


block = BasicBlock()
optimizer = torch.optim.SGD(block.parameters(), lr=0.1)
loss = block(torch.randn(2, 4, 6, 6)).mean()
loss.backward()
optimizer.step()
print(all(p.grad is not None for p in block.parameters()))
