import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(16, 32), nn.ReLU())
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        return self.head(self.backbone(x))


def freeze_backbone(model):
    model.backbone.requires_grad = False  # ROOT
    return model
