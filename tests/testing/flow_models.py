"""Small real models for the gradtrace.testing tests; `# <- name` marks lines tests look up."""
from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

HERE = Path(__file__)


def line_of(marker: str) -> int:
    """1-based line of the `# <- marker` comment in this file."""
    for i, text in enumerate(HERE.read_text().splitlines(), 1):
        if text.rstrip().endswith(f"# <- {marker}"):
            return i
    raise LookupError(marker)


class TwoHeads(nn.Module):
    """A shared body and two heads; `detach_second` cuts the second head off the loss."""

    def __init__(self, detach_second: bool = False) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.5))
        self.head1 = nn.Linear(8, 3)
        self.head2 = nn.Linear(8, 1)
        self.detach_second = detach_second

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.body(x)
        out2 = self.head2(h)
        if self.detach_second:
            out2 = out2.detach()  # <- detach
        return self.head1(h), out2


def two_head_loss(y: torch.Tensor, t: torch.Tensor) -> "callable":
    def loss(out: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        logits, score = out
        return F.cross_entropy(logits, y) + F.mse_loss(score.squeeze(1), t)
    return loss


class Extras(nn.Module):
    """Parameters with every kind of problem, switched on by name."""

    def __init__(self, problem: str) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.extra = nn.Parameter(torch.ones(2))
        self.problem = problem

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.fc(x)
        if self.problem == "zero":
            out = out + self.extra * torch.zeros(2)
        elif self.problem == "nan":
            out = out + self.extra * torch.tensor([float("nan"), 1.0])
        elif self.problem == "no_grad":
            with torch.no_grad():  # <- no_grad
                bias = self.extra * 2
            out = out + bias
        elif self.problem == "data":
            out = out + self.extra.data  # <- data
        elif self.problem == "freeze":
            self.extra.requires_grad_(False)  # <- freeze
            out = out + self.extra
        elif self.problem == "argmax":
            idx = (out + self.extra).argmax(dim=1)  # <- argmax
            out = out + idx.unsqueeze(1).float()
        elif self.problem == "ok":
            out = out + self.extra
        return out
