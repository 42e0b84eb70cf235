"""The vscode-pytorch "freeze" snippet with the attribute spelt as the issue asks, `param.requires_grad = False`: the feature extractor's parameters stop requiring grad, the `requires_grad` filter leaves them out of the optimizer, and only the new classification head is trained.

source: https://github.com/SvenBecker/vscode-pytorch/issues/8
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class SmallVGG(nn.Module):
    """Stands in for a pretrained torchvision VGG: `features` and a replaceable `classifier`."""

    def __init__(self, num_classes=1000):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.classifier = nn.Linear(16, num_classes)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def freeze(model):
    for param in model.parameters():
        param.requires_grad = False


model = SmallVGG()
freeze(model.features)
model.classifier = nn.Linear(16, 5)

before = [p.detach().clone() for p in model.features.parameters()]
optimizer = torch.optim.SGD(filter(lambda p: p.requires_grad, model.parameters()), lr=0.1, momentum=0.9)

images = torch.randn(32, 3, 16, 16)
labels = torch.randint(0, 5, (32,))
for step in range(5):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")

changed = any(not torch.equal(b, p) for b, p in zip(before, model.features.parameters()))
trainable = sum(p.requires_grad for p in model.features.parameters())
print(f"features changed: {changed}, features parameters requiring grad: {trainable}")
