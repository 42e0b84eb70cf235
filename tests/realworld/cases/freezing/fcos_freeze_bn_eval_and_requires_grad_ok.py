"""FCOS freezes its backbone BatchNorm layers both ways: eval() for the running stats and requires_grad=False for the affine weights.

source: https://github.com/VectXmy/FCOS.Pytorch/issues/9
kind: lookalike
"""
import torch
import torch.nn as nn


class FCOS(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                                      nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.head = nn.Conv2d(16, 5, 1)

    def train(self, mode=True):
        super().train(mode)

        def freeze_bn(module):
            if isinstance(module, nn.BatchNorm2d):
                module.eval()
            classname = module.__class__.__name__
            if classname.find('BatchNorm') != -1:
                for p in module.parameters():
                    p.requires_grad = False

        self.backbone.apply(freeze_bn)
        return self

    def forward(self, x):
        return self.head(self.backbone(x)).mean((2, 3))


torch.manual_seed(0)
model = FCOS()
model.train()
optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
stats_before = model.backbone[1].running_mean.clone()
for epoch in range(5):
    model.train()
    x, y = torch.randn(16, 3, 8, 8) * 2 + 1, torch.randint(0, 5, (16,))
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print((model.backbone[1].running_mean - stats_before).abs().max().item())
