"""Deep-learning-activity-recognition (pytorch/main_pytorch.py): the network ends with F.softmax and its output goes to nn.CrossEntropyLoss, which applies log_softmax again; the probabilities are treated as logits, so even a perfect prediction keeps a loss of log(1 + (C - 1) / e) and the gradients shrink.

source: https://github.com/jindongwang/Deep-learning-activity-recognition/issues/10
kind: bug
symptom: silent
verified: with 6 classes the loss of a one-hot (perfect) output is 1.043 instead of 0, and after 50 Adam steps on a separable toy task the training loss is stuck at 1.0436 (the same network without the softmax reaches 3e-6)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Network(nn.Module):
    def __init__(self, n_features=9, n_classes=6):
        super(Network, self).__init__()
        self.conv1 = nn.Sequential(nn.Conv1d(n_features, 16, 3, padding=1), nn.ReLU(), nn.MaxPool1d(2))
        self.fc1 = nn.Sequential(nn.Flatten(), nn.Linear(16 * 8, 32), nn.ReLU())
        self.fc2 = nn.Linear(32, n_classes)

    def forward(self, x):
        out = self.fc1(self.conv1(x))
        out = self.fc2(out)
        out = F.softmax(out, dim=1)  # ROOT
        return out


torch.manual_seed(0)
model = Network()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
criterion = nn.CrossEntropyLoss()
labels = torch.arange(6).repeat(4)
samples = torch.randn(6, 9, 16)[labels] + 0.05 * torch.randn(24, 9, 16)
for step in range(50):
    loss = criterion(model(samples), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(loss.item(), criterion(torch.eye(6), torch.arange(6)).item())
