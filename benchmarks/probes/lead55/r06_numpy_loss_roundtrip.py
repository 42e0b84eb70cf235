"""Per-sample losses are weighted in NumPy and brought back with torch.from_numpy."""
import numpy as np
import torch
import torch.nn as nn


def weighted_loss(pred, target, weights):
    per_sample = (pred - target).pow(2).mean(dim=1)
    arr = per_sample.detach().cpu().numpy() * weights  # ROOT
    return torch.from_numpy(arr).float().mean()


def train(model, data, weights, epochs=2):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(epochs):
        for x, y in data:
            opt.zero_grad()
            loss = weighted_loss(model(x), y, weights)
            loss.backward()
            opt.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 2))
    batches = [(torch.randn(10, 5), torch.randn(10, 2)) for _ in range(3)]
    train(net, batches, np.linspace(0.5, 1.5, 10))
