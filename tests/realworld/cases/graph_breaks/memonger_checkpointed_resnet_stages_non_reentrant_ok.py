"""Memory-saving ResNet checkpoints every stage with the non-reentrant checkpoint, which needs no input gradient.

source: https://github.com/Lyken17/pytorch-memonger/issues/4
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def stage(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())


class ResNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.layer1 = stage(3, 8)
        self.layer2 = stage(8, 16)
        self.layer3 = stage(16, 16)
        self.layer4 = stage(16, 32)
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        out = checkpoint(self.layer1, x, use_reentrant=False)
        out = checkpoint(self.layer2, out, use_reentrant=False)
        out = checkpoint(self.layer3, out, use_reentrant=False)
        out = checkpoint(self.layer4, out, use_reentrant=False)
        out = F.adaptive_avg_pool2d(out, 1).flatten(1)
        return self.fc(out)


torch.manual_seed(0)
model = ResNet()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
images, labels = torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))
for it in range(3):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
print(model.layer1[0].weight.grad is None, model.fc.weight.grad is None)
