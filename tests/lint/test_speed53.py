"""speed53: GT427 builds no scope for a function that never spells ``requires_grad``
(NOTE [flag lines]), and still finds the freezer that does."""
from __future__ import annotations

import textwrap

from gradtrace.lint import check_source

FREEZE = textwrap.dedent('''
    import torch

    def freeze(m):
        for p in m.parameters():
            p.requires_grad = False

    def log(m):
        return sum(p.numel() for p in m.parameters())

    def train(model, loader):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            freeze(model)
            log(model)
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    ''')


def test_freezer_found_through_its_flag_lines():
    assert [(f.code, f.line) for f in check_source(FREEZE, "t.py") if f.code == "GT427"] == [
        ("GT427", 6)]
    quiet = FREEZE.replace("p.requires_grad = False", "p.grad = None")
    assert not [f for f in check_source(quiet, "t.py") if f.code == "GT427"]
