"""Test function that calls model.eval() before the loop (the DM-Count fix for a BatchNorm backbone), so the BatchNorm/Dropout network is evaluated with its running statistics and no dropout, and testing does not move the statistics.

source: https://github.com/cvlab-stonybrook/DM-Count/issues/3
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GACNet(nn.Module):
    def __init__(self, num_classes=4):
        super().__init__()
        self.conv1 = nn.Conv1d(3, 32, 1)
        self.bn1 = nn.BatchNorm1d(32)
        self.fc1 = nn.Linear(32, 32)
        self.bn2 = nn.BatchNorm1d(32)
        self.drop = nn.Dropout(0.5)
        self.fc2 = nn.Linear(32, num_classes)

    def forward(self, xyz):
        x = F.relu(self.bn1(self.conv1(xyz))).max(dim=2)[0]
        x = self.drop(F.relu(self.bn2(self.fc1(x))))
        return self.fc2(x)


def test(model, loader):
    model.eval()
    correct, total = 0, 0
    for points, target in loader:
        pred = model(points)
        correct += (pred.argmax(1) == target).sum().item()
        total += target.numel()
    return correct / total


torch.manual_seed(0)
model = GACNet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
train_loader = [(torch.randn(16, 3, 64), torch.randint(0, 4, (16,))) for _ in range(4)]
test_loader = [(torch.randn(32, 3, 64) + 0.5, torch.randint(0, 4, (32,))) for _ in range(2)]
for epoch in range(2):
    model.train()
    for points, target in train_loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(points), target)
        loss.backward()
        optimizer.step()
    stats = model.bn1.running_mean.clone()
    with torch.no_grad():
        acc1, acc2 = test(model, test_loader), test(model, test_loader)
    print(epoch, acc1, acc2, (model.bn1.running_mean - stats).abs().max().item())
