"""Linear evaluation freezes every backbone weight but calls model.train(): BatchNorm statistics keep moving.

source: https://github.com/kdexd/virtex/issues/16
kind: bug
symptom: silent
verified: model.visual.bn.running_mean changes during training although the backbone is frozen
"""
import torch
import torch.nn as nn


class FeatureExtractor(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x))).mean((2, 3))


class LinearProbe(nn.Module):
    def __init__(self, num_classes=4):
        super().__init__()
        self.visual = FeatureExtractor()
        self.fc = nn.Linear(8, num_classes)

    def forward(self, x):
        return self.fc(self.visual(x))


torch.manual_seed(0)
model = LinearProbe()
for name, param in model.named_parameters():
    if "fc" not in name:
        param.requires_grad = False
optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1, momentum=0.9)
model.train()  # ROOT
images, labels = torch.randn(8, 3, 6, 6) * 3 + 2, torch.randint(0, 4, (8,))
for iteration in range(5):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
