"""Notebook calls model.train() at the start of every epoch and model.eval() in test().

source: https://github.com/bainjamain/pytorch-examples/issues/2
kind: lookalike
"""
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(20, 32)
        self.bn1 = nn.BatchNorm1d(32)
        self.drop = nn.Dropout(0.5)
        self.fc2 = nn.Linear(32, 3)

    def forward(self, x):
        return self.fc2(self.drop(torch.relu(self.bn1(self.fc1(x)))))


def train(model, loader, optimizer):
    for data, target in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()


def test(model, loader):
    model.eval()
    correct = 0
    with torch.no_grad():
        for data, target in loader:
            correct += (model(data).argmax(1) == target).sum().item()
    return correct


torch.manual_seed(0)
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
train_loader = [(torch.randn(16, 20) + 1, torch.randint(0, 3, (16,))) for _ in range(4)]
test_loader = [(torch.randn(16, 20) + 1, torch.randint(0, 3, (16,)))]
for epoch in range(3):
    model.train()
    stats_before = model.bn1.running_mean.clone()
    train(model, train_loader, optimizer)
    print(epoch, model.training, (model.bn1.running_mean - stats_before).abs().max().item())
    test(model, test_loader)
