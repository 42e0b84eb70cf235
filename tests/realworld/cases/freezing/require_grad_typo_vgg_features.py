"""Transfer-learning notebook freezes VGG features with `param.require_grad = False` (missing "s").

source: https://github.com/udacity/deep-learning-v2-pytorch/issues/12
kind: bug
symptom: silent
verified: vgg16.features[0].weight changes during training; every param still has requires_grad=True
"""
import torch
import torch.nn as nn
import torch.optim as optim


class VGG16(nn.Module):
    def __init__(self, n_classes=5):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(8 * 4 * 4, n_classes))

    def forward(self, x):
        return self.classifier(self.features(x))


torch.manual_seed(0)
vgg16 = VGG16()
# Freeze training for all "features" layers
for param in vgg16.features.parameters():
    param.require_grad = False  # ROOT
criterion = nn.CrossEntropyLoss()
optimizer = optim.SGD(vgg16.parameters(), lr=0.001)
inputs, labels = torch.randn(4, 3, 8, 8), torch.tensor([0, 1, 2, 3])
for batch_i in range(5):
    optimizer.zero_grad()
    loss = criterion(vgg16(inputs), labels)
    loss.backward()
    optimizer.step()
