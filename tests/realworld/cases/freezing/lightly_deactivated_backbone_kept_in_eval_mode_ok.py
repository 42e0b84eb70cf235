"""Backbone frozen with lightly's deactivate_requires_grad is put back in eval mode after classifier.train(), so BatchNorm uses fixed statistics.

source: https://github.com/lightly-ai/lightly/issues/1438
kind: lookalike
"""
import torch
import torch.nn as nn


def deactivate_requires_grad(model):
    for param in model.parameters():
        param.requires_grad = False


class Classifier(nn.Module):
    def __init__(self, backbone, num_classes=10):
        super().__init__()
        self.backbone = backbone
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x):
        return self.fc(self.backbone(x).flatten(start_dim=1))


torch.manual_seed(0)
backbone = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
deactivate_requires_grad(backbone)
classifier = Classifier(backbone)
optimizer = torch.optim.SGD(classifier.fc.parameters(), lr=0.1)
running_mean_before = backbone[1].running_mean.clone()
for epoch in range(3):
    classifier.train()
    classifier.backbone.eval()
    images, labels = torch.randn(16, 3, 8, 8) + 1.0, torch.randint(0, 10, (16,))
    loss = nn.functional.cross_entropy(classifier(images), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print((backbone[1].running_mean - running_mean_before).abs().max().item())
