from dataclasses import dataclass

import torch


@dataclass
class TrainConfig:
    lr: float = 0.05
    steps: int = 3


cfg = TrainConfig()
w = torch.zeros(5, 1, requires_grad=True)
for _ in range(cfg.steps):
    x, y = torch.randn(16, 5), torch.randn(16, 1)
    loss = ((x @ w - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        w -= cfg.lr * w.grad
    w.grad = None
print("ok", w.norm().item())
