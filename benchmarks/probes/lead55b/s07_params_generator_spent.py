"""The parameter generator is consumed by a parameter count before the optimizer gets it."""
import torch
import torch.nn as nn


def build(cfg):
    model = nn.Sequential(nn.Linear(cfg["d"], cfg["h"]), nn.ReLU(), nn.Linear(cfg["h"], 1))
    params = model.parameters()
    n = sum(p.numel() for p in params)  # ROOT
    print(f"{n} trainable values")
    optimizer = torch.optim.Adam(params, lr=cfg["lr"])
    return model, optimizer


model, optimizer = build({"d": 4, "h": 8, "lr": 1e-3})
x, y = torch.randn(16, 4), torch.randn(16, 1)
loss = ((model(x) - y) ** 2).mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()
