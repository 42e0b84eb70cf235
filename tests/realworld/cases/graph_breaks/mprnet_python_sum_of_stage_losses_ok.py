"""MPRNet deblurring with the maintainer's fix: Python's sum over the per-stage losses keeps the graph.

source: https://github.com/swz30/MPRNet/issues/91
kind: lookalike
"""
import torch
import torch.nn as nn


class CharbonnierLoss(nn.Module):
    def __init__(self, eps=1e-3):
        super().__init__()
        self.eps = eps

    def forward(self, x, y):
        diff = x - y
        return torch.mean(torch.sqrt((diff * diff) + (self.eps * self.eps)))


class MPRNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stage1 = nn.Conv2d(3, 3, 3, padding=1)
        self.stage2 = nn.Conv2d(3, 3, 3, padding=1)
        self.stage3 = nn.Conv2d(3, 3, 3, padding=1)

    def forward(self, x):
        s1 = x + self.stage1(x)
        s2 = s1 + self.stage2(s1)
        s3 = s2 + self.stage3(s2)
        return [s3, s2, s1]


torch.manual_seed(0)
model_restoration = MPRNet()
optimizer = torch.optim.Adam(model_restoration.parameters(), lr=2e-4)
criterion_char = CharbonnierLoss()
train_loader = [(torch.rand(2, 3, 16, 16), torch.rand(2, 3, 16, 16)) for _ in range(2)]
for epoch in range(1):
    for i, (target, input_) in enumerate(train_loader):
        optimizer.zero_grad()
        restored = model_restoration(input_)
        loss_char = sum([criterion_char(restored[j], target) for j in range(len(restored))])
        loss = loss_char
        loss.backward()
        optimizer.step()
        epoch_loss = loss.item()
