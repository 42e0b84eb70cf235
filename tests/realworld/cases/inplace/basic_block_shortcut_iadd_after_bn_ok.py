"""ResNet BasicBlock with out += self.shortcut(x) after bn2: the in-place add writes the batch-norm output, which BatchNorm's backward does not need, so training runs (the thread asks why no inplace error).

source: https://discuss.pytorch.org/t/when-inplace-operation-are-allowed-and-when-not/169583
kind: lookalike
verified: backward succeeds in train mode and every conv/bn weight gets a gradient
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1, shortcut_enabled=True, device='cpu'):
        super(BasicBlock, self).__init__()
        self.shortcut_enabled = shortcut_enabled
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False,
                               device=device)
        self.bn1 = nn.BatchNorm2d(planes, device=device)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False,
                               device=device)
        self.bn2 = nn.BatchNorm2d(planes, device=device)
        if self.shortcut_enabled:
            self.shortcut = nn.Sequential()
            if stride != 1 or in_planes != self.expansion * planes:
                self.shortcut = nn.Sequential(
                    nn.Conv2d(in_planes, self.expansion * planes, kernel_size=1, stride=stride, bias=False,
                              device=device),
                    nn.BatchNorm2d(self.expansion * planes, device=device))

    def forward(self, x, verbose=0):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.shortcut_enabled:
            out += self.shortcut(x)
        out = F.relu(out)
        return out


model = nn.Sequential(BasicBlock(3, 8, stride=2), BasicBlock(8, 8), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                      nn.Linear(8, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
model.train()
for step in range(2):
    x, y = torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(all(p.grad is not None for p in model.parameters()))
