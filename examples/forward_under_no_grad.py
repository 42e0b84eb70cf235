"""The forward pass runs under no_grad (copied from the evaluation code)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

model = nn.Linear(10, 3)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
inputs, labels = torch.randn(32, 10), torch.randint(0, 3, (32,))

for epoch in range(3):
    optimizer.zero_grad()
    with torch.no_grad():
        logits = model(inputs)
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    optimizer.step()
