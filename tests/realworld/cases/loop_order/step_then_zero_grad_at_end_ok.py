"""Tutorial loop that calls optimizer.zero_grad() after optimizer.step() at the end of the iteration.

source: https://github.com/patrickloeber/pytorchTutorial/issues/19
kind: lookalike
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(4, 3)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
inputs, labels = torch.randn(12, 4), torch.randint(0, 3, (12,))
for epoch in range(10):
    outputs = model(inputs)
    loss = criterion(outputs, labels)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
