"""GACNet classification: the test function runs the BatchNorm/Dropout network without model.eval(), so test accuracy comes from batch statistics and random dropout masks, and every test pass moves the BatchNorm running statistics toward the test data.

source: https://github.com/yanx27/GACNet/issues/8
kind: bug
symptom: silent
verified: after the first epoch two test() calls on the same test set give accuracy 0.266 and 0.234 and bn1.running_mean moves 0.31 (max abs) during them; with model.eval() in test() both give 0.3125 and the statistics do not move
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
    correct, total = 0, 0
    for points, target in loader:
        pred = model(points)  # ROOT
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
