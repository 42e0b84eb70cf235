"""An epoch helper clears the gradients between backward and step."""
import torch
import torch.nn as nn


def train_one_epoch(model, loader, optimizer, loss_fn):
    model.train()
    for inputs, targets in loader:
        outputs = model(inputs)
        loss = loss_fn(outputs, targets)
        loss.backward()
        optimizer.zero_grad()  # ROOT
        optimizer.step()


if __name__ == "__main__":
    model = nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 2))
    loader = [(torch.randn(10, 6), torch.randint(0, 2, (10,))) for _ in range(4)]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for epoch in range(2):
        train_one_epoch(model, loader, optimizer, nn.CrossEntropyLoss())
