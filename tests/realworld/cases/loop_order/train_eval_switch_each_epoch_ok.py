"""MLP with dropout: model.train() at the top of every epoch and model.eval() for validation.

source: https://github.com/udacity/deep-learning-v2-pytorch/issues/3
kind: lookalike
"""
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 16)
        self.fc2 = nn.Linear(16, 3)
        self.dropout = nn.Dropout(0.2)

    def forward(self, x):
        return self.fc2(self.dropout(torch.relu(self.fc1(x))))


torch.manual_seed(0)
model = Net()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
train_loader = [(torch.randn(8, 12), torch.randint(0, 3, (8,)))] * 3
valid_loader = train_loader[:1]
for epoch in range(3):
    train_loss = 0.0
    model.train()
    for data, target in train_loader:
        optimizer.zero_grad()
        output = model(data)
        loss = criterion(output, target)
        loss.backward()
        optimizer.step()
        train_loss += loss.item() * data.size(0)
    valid_loss = 0.0
    model.eval()
    for data, target in valid_loader:
        output = model(data)
        valid_loss += criterion(output, target).item() * data.size(0)
