"""The loss is rebuilt from a Python float: backward() runs, but nothing trains."""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(64, 4), torch.randn(64, 1)

for step in range(5):
    optimizer.zero_grad()
    mse = nn.functional.mse_loss(model(x), y).item()
    loss = torch.tensor(mse, requires_grad=True)
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")
