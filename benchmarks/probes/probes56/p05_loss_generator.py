"""A generator yields one loss per micro-batch; the caller averages a window of them."""
import torch
import torch.nn as nn


def micro_losses(model, batches, criterion):
    for x, y in batches:
        yield criterion(model(x), y).item()  # ROOT


model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
batches = [(torch.randn(5, 4), torch.randn(5, 1)) for _ in range(8)]
window = []
for i, l in enumerate(micro_losses(model, batches, nn.MSELoss())):
    window.append(l)
    if len(window) == 4:
        loss = torch.tensor(window).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        window = []
