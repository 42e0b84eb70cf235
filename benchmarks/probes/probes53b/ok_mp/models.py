import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.ModuleList([nn.Linear(16, 32), nn.Linear(32, 32)])
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        for layer in self.backbone:
            x = layer(x).relu()
        return self.head(x)


def freeze_backbone(model):
    model.backbone.requires_grad_(False)
    return model
