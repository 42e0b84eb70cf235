"""Hidden layers kept in a plain Python list: the optimizer never sees them."""
import torch
import torch.nn as nn


class MLP(nn.Module):
    def __init__(self, sizes):
        super().__init__()
        self.layers = [nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])]
        self.head = nn.Linear(sizes[-1], 1)

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.head(x)


model = MLP([8, 32, 32])
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
x, y = torch.randn(16, 8), torch.randn(16, 1)
for _ in range(10):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
