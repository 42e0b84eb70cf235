"""Moving the model (here to float64) after constructing the optimizer: Module.to() converts in place.

source: https://github.com/pytorch/pytorch/issues/7844
kind: lookalike
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
model = model.to(torch.float64)
x, y = torch.randn(16, 3, dtype=torch.float64), torch.randn(16, 1, dtype=torch.float64)
for _ in range(5):
    optimizer.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
