from dataclasses import dataclass

import torch


@dataclass
class TrainConfig:
    lr: float = 0.05
    steps: int = 3
    dim: int = 5


def train(cfg: TrainConfig):
    w = torch.zeros(cfg.dim, 1, requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    for _ in range(cfg.steps):
        x, y = torch.randn(16, cfg.dim), torch.randn(16, 1)
        loss = ((x @ w + b - y) ** 2).mean()
        loss.backward()
        w = w - cfg.lr * w.grad  # ROOT
        b = b - cfg.lr * b.grad
    return w, b


print(train(TrainConfig()))
