import torch
import torch.nn as nn


def train_one_epoch(model, loader, optimizer, criterion):
    model.train()
    for inputs, targets in loader:
        # optimizer.zero_grad()  # ROOT
        outputs = model(inputs)
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()


model = nn.Linear(6, 2)
loader = [(torch.randn(4, 6), torch.randint(0, 2, (4,))) for _ in range(5)]
train_one_epoch(model, loader, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss())
