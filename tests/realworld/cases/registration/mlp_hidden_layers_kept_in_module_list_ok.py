"""MLP keeps its hidden Linear layers in an nn.ModuleList, which registers them.

source: https://github.com/pytorch/pytorch/issues/38639
kind: lookalike
"""
import torch
import torch.nn as nn


class MLP(nn.Module):
    def __init__(self, in_dim=10, hidden=32, n_hidden=3, out_dim=1):
        super().__init__()
        dims = [in_dim] + [hidden] * n_hidden
        self.hidden_layers = nn.ModuleList([nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:])])
        self.output = nn.Linear(hidden, out_dim)

    def forward(self, x):
        for layer in self.hidden_layers:
            x = torch.relu(layer(x))
        return self.output(x)


torch.manual_seed(0)
model = MLP()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
x, y = torch.randn(64, 10), torch.randn(64, 1)
before = model.hidden_layers[0].weight.detach().clone()
for epoch in range(5):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
print((model.hidden_layers[0].weight - before).abs().max().item())
