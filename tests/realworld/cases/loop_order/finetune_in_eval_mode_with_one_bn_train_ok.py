"""FixRes fine-tuning keeps the model in eval() mode on purpose and puts only the last BatchNorm in train().

source: https://github.com/facebookresearch/FixRes/issues/9
kind: lookalike
"""
import torch
import torch.nn as nn


class Bottleneck(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv3 = nn.Conv2d(c, c, 1)
        self.bn3 = nn.BatchNorm2d(c)

    def forward(self, x):
        return torch.relu(x + self.bn3(self.conv3(x)))


class ResNetTail(nn.Module):
    def __init__(self, c=4, num_classes=3):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, padding=1), nn.BatchNorm2d(c))
        self.layer4 = nn.Sequential(Bottleneck(c), Bottleneck(c), Bottleneck(c))
        self.fc = nn.Linear(c, num_classes)

    def forward(self, x):
        return self.fc(self.layer4(self.stem(x)).mean((2, 3)))


torch.manual_seed(0)
model = ResNetTail()
for name, p in model.named_parameters():
    p.requires_grad = name.startswith('fc') or name.startswith('layer4.2.bn3')
optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1e-3, momentum=0.9)
images, labels = torch.randn(8, 3, 6, 6), torch.randint(0, 3, (8,))
for epoch in range(3):
    model.eval()
    model.layer4[2].bn3.train()
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
