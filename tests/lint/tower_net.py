"""The model file of a small project shared by the cross-file GT115 tests (NOTE [trained
abroad]): ``Tower`` builds no optimizer; its ``forward`` feeds the head ``cut``."""
from __future__ import annotations

NET = '''
import torch.nn as nn


class Tower(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.lookup = nn.Linear(4, width)
        self.stage = nn.Linear(width, width)
        self.out = nn.Linear(width, 2)

    def forward(self, x):
        h = self.lookup(x)
        h = self.stage(h)
        return self.out({cut})
'''


def tower(cut: str = "h.detach()") -> str:
    """The model file's text, its head fed ``cut`` (the detached features by default)."""
    return NET.format(cut=cut)
