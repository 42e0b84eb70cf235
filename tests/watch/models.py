"""Small real models used by the watch tests."""
from __future__ import annotations

import torch
import torch.nn as nn


class LogAct(nn.Module):
    """Applies log: NaN for negative inputs."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(x)  # LOG-LINE


class LogNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.act = LogAct()
        self.fc2 = nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(x).abs() + 1.0 + x[:, :1]  # x[:, 0] in [0, 1) keeps h > 0
        return self.fc2(self.act(h))


class TwoHead(nn.Module):
    """A body with a used head and an unused head."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
        self.head = nn.Linear(16, 2)
        self.aux_head = nn.Linear(16, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class Branchy(nn.Module):
    """Two branches summed; the second one may be frozen or detached."""

    def __init__(self, detach: bool = False) -> None:
        super().__init__()
        self.detach = detach
        self.main = nn.Linear(8, 2)
        self.side = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.side(x)
        return self.main(x) + (s.detach() if self.detach else s)


def mlp(depth: int = 3, width: int = 32, act: type[nn.Module] = nn.ReLU,
        d_in: int = 16, d_out: int = 4) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Linear(d_in, width), act()]
    for _ in range(depth - 2):
        layers += [nn.Linear(width, width), act()]
    layers.append(nn.Linear(width, d_out))
    return nn.Sequential(*layers)


def cnn() -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
        nn.Conv2d(8, 16, 3, padding=1, stride=2, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 4))


def train(model: nn.Module, opt: torch.optim.Optimizer | None, steps: int, *,
          d_in: int = 16, d_out: int = 4, batch: int = 32, seed: int = 0,
          loss_fn: nn.Module | None = None, image: bool = False,
          data: list[tuple[torch.Tensor, torch.Tensor]] | None = None) -> list[float]:
    """A plain training loop on a fixed synthetic regression/classification task."""
    g = torch.Generator().manual_seed(seed)
    loss_fn = loss_fn or nn.MSELoss()
    losses = []
    for i in range(steps):
        if data is not None:
            x, y = data[i]
        elif image:
            x, y = torch.randn(batch, 3, 8, 8, generator=g), torch.randn(batch, d_out, generator=g)
        else:
            x = torch.randn(batch, d_in, generator=g)
            y = torch.tanh(x[:, :d_out] * 2)
        if opt is not None:
            opt.zero_grad()
        else:
            model.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        if opt is not None:
            opt.step()
        else:
            with torch.no_grad():
                for p in model.parameters():
                    if p.grad is not None:
                        p -= 0.05 * p.grad
        losses.append(loss.item())
    return losses
