import torch.nn as nn


class FineTuner(nn.Module):
    def __init__(self, n_cls=4):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
        self.head = nn.Linear(32, n_cls)

    def freeze_backbone(self):
        for p in self.backbone.parameters():
            p.requires_grad = False
        return self

    def train(self, mode=True):
        super().train(mode)
        for p in self.parameters():
            p.requires_grad = mode  # ROOT
        return self

    def forward(self, x):
        return self.head(self.backbone(x))
