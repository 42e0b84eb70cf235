"""Small DDP models whose unused parameters have different causes (lines marked `# <- ...`)."""
from __future__ import annotations

import torch
import torch.nn as nn


class Detached(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body, self.head = nn.Linear(4, 8), nn.Linear(8, 1)

    def forward(self, x, step):
        h = torch.relu(self.body(x)).detach()  # <- cut
        return self.head(h)


class TwoOutputs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body, self.head, self.aux = nn.Linear(4, 8), nn.Linear(8, 1), nn.Linear(8, 2)

    def forward(self, x, step):
        h = torch.relu(self.body(x))
        return self.head(h), self.aux(h)  # <- aux call


class StepBranch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body, self.head, self.aux = nn.Linear(4, 8), nn.Linear(8, 1), nn.Linear(8, 1)

    def forward(self, x, step):
        h = torch.relu(self.body(x))
        if step == 0:
            return self.head(h) + self.aux(h)  # <- step branch
        return self.head(h)


class NoGradAux(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body, self.head, self.aux = nn.Linear(4, 8), nn.Linear(8, 1), nn.Linear(8, 1)

    def forward(self, x, step):
        h = torch.relu(self.body(x))
        with torch.no_grad():  # <- no grad
            bonus = self.aux(h)
        return self.head(h) + bonus


class Used(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body, self.head = nn.Linear(4, 8), nn.Linear(8, 1)

    def forward(self, x, step):
        return self.head(torch.relu(self.body(x)))


def freeze_body(ddp) -> None:
    """Freeze the first layer AFTER DistributedDataParallel was built."""
    ddp.module.body.requires_grad_(False)  # <- frozen after wrap


def loss_of(out):
    """The first output when forward returns several (the others are ignored)."""
    return (out[0] if isinstance(out, tuple) else out).pow(2).mean()
