from dataclasses import dataclass, field

import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self, dim=12):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.cls = nn.Linear(dim, 2)

    def forward(self, x):
        return self.cls(torch.tanh(self.proj(x)))


@dataclass
class TrainState:
    model: nn.Module
    optimizer: torch.optim.Optimizer
    step: int = 0
    history: list = field(default_factory=list)


def make_state(lr=1e-2):
    return TrainState(model=Encoder(), optimizer=torch.optim.SGD(Encoder().parameters(), lr=lr))  # ROOT
