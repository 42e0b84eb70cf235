"""Training loop adds loss.item() to running_loss, so only numbers outlive each step's graph.

source: https://github.com/pytorch/pytorch/issues/17568
kind: lookalike
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
running_loss = 0.0
for i in range(4):
    inputs, labels = torch.randn(8, 10), torch.randn(8, 1)
    optimizer.zero_grad()
    loss = criterion(model(inputs), labels)
    loss.backward()
    optimizer.step()
    running_loss += loss.item()
print(running_loss / 4)
