"""ImageNet example fine-tuning: model.fc is replaced right after loading, before wrapping and the optimizer.

source: https://github.com/pytorch/vision/issues/132
kind: lookalike
"""
import torch
import torch.nn as nn


class ResNet18(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, num_classes)

    def forward(self, x):
        return self.fc(torch.relu(self.conv1(x)).mean((2, 3)))


torch.manual_seed(0)
model = ResNet18()
model.fc = nn.Linear(8, 100)
model = torch.nn.DataParallel(model)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), 0.1, momentum=0.9, weight_decay=1e-4)
input, target = torch.randn(4, 3, 8, 8), torch.randint(0, 100, (4,))
for i in range(5):
    output = model(input)
    loss = criterion(output, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
