"""Fine-tuning script meant to freeze the backbone sets a plain attribute on the submodule."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                      nn.Flatten())
        self.classifier = nn.Linear(8, 5)

    def forward(self, x):
        return self.classifier(self.backbone(x))


def build(cfg):
    model = Model()
    if cfg["freeze_backbone"]:
        model.backbone.requires_grad = False  # ROOT
    return model


if __name__ == "__main__":
    model = build({"freeze_backbone": True})
    opt = torch.optim.SGD(filter(lambda p: p.requires_grad, model.parameters()), lr=0.01)
    for _ in range(2):
        loss = nn.functional.cross_entropy(model(torch.randn(2, 3, 16, 16)), torch.tensor([0, 1]))
        opt.zero_grad()
        loss.backward()
        opt.step()
