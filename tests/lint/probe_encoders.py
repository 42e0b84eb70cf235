"""A module class that the shapes of test_precision_s15.py import, so that its code is out
of the checked file's sight (a model of another file of a project)."""
from __future__ import annotations

import torch
from torch import nn


class GraphEncoder(nn.Module):
    """An encoder with an evaluation helper that detaches (`embed`, as DGI's) and one that
    keeps the graph (`encode`)."""

    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        self.lin = nn.Linear(n_in, n_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.lin(x))

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward(x).detach()

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward(x)
