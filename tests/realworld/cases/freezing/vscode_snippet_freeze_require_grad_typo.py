"""The "freeze" snippet of the vscode-pytorch extension writes `param.require_grad = False` (no "s"): assigning the misspelt attribute just creates a new Python attribute on each parameter, `requires_grad` stays True, so the backbone frozen with the snippet is in the `requires_grad` filter handed to the optimizer and is fine-tuned with the new head, without any error or warning.

source: https://github.com/SvenBecker/vscode-pytorch/issues/8
kind: bug
symptom: silent
verified: after 5 SGD steps the "frozen" feature extractor's weights have changed and 4 of its 4 parameters still require grad; the look-alike's feature extractor is unchanged and only the head trains
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
        param.require_grad = False  # ROOT


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
