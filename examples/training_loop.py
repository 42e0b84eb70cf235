"""Gradients are cleared once per epoch, and the running loss keeps every graph alive."""
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 2))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
batches = [(torch.randn(8, 20), torch.randint(0, 2, (8,))) for _ in range(10)]

for epoch in range(3):
    optimizer.zero_grad()
    total_loss = 0.0
    for inputs, targets in batches:
        loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total_loss += loss
    print(f"epoch {epoch}: {total_loss / len(batches):.3f}")
