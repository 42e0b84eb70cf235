"""RecoNet: the rank weights lam are a plain tensor with requires_grad=True, never registered as a Parameter.

source: https://github.com/CWanli/RecoNet/issues/10
kind: bug
symptom: silent
verified: model.head.tgm.lam never changes: its .grad grows but it is not in model.parameters()
"""
import torch
import torch.nn as nn


class TGM(nn.Module):
    """Tensor generation module: one rank-1 attention tensor per rank."""

    def __init__(self, channels, rank):
        super().__init__()
        self.rank = rank
        self.c_proj = nn.ModuleList(nn.Conv2d(channels, channels, 1) for _ in range(rank))
        self.lam = torch.ones(self.rank, requires_grad=True)  # ROOT

    def forward(self, x):
        pooled = x.mean(dim=(2, 3), keepdim=True)
        out = 0
        for i in range(self.rank):
            out = out + self.lam[i] * torch.sigmoid(self.c_proj[i](pooled))
        return x * out


class RecoHead(nn.Module):
    def __init__(self, channels, num_classes, rank=4):
        super().__init__()
        self.tgm = TGM(channels, rank)
        self.cls = nn.Conv2d(channels, num_classes, 1)

    def forward(self, x):
        return self.cls(self.tgm(x))


class RecoNet(nn.Module):
    def __init__(self, num_classes=3):
        super().__init__()
        self.backbone = nn.Conv2d(3, 8, 3, padding=1)
        self.head = RecoHead(8, num_classes)

    def forward(self, x):
        return self.head(torch.relu(self.backbone(x)))


torch.manual_seed(0)
model = RecoNet()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
images, masks = torch.rand(2, 3, 8, 8), torch.randint(0, 3, (2, 8, 8))
for it in range(3):
    loss = nn.functional.cross_entropy(model(images), masks)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
