"""Session 35, runtime (docs/triage/runtime35.md): the run names the root line first.
Real torch; each bug has its look-alike."""
from __future__ import annotations

import inspect

import torch
import torch.nn as nn
import torch.nn.functional as F

import gradtrace


# -- NOTE [cut that reaches the loss] ----------------------------------------------------------
def _first(tr, code: str):
    return next((f for f in tr.findings if f.code == code), None)


def _pad_to(t: torch.Tensor, n: int, data: bool) -> torch.Tensor:
    width = [0] * (len(t.data.shape) * 2)  # a size read from `.data`: cuts nothing
    width[1] = n - t.shape[-1]
    return F.pad(t.data if data else t, width)


def _padded_model(data: bool):
    class Padded(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first, self.last = nn.Linear(5, 6), nn.Linear(8, 2)

        def forward(self, x):
            return self.last(_pad_to(torch.relu(self.first(x)), 8, data))

    torch.manual_seed(0)
    model = Padded()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gradtrace.trace(static=False) as tr:
        for _ in range(3):
            loss = F.mse_loss(model(torch.randn(4, 5)), torch.randn(4, 2))
            opt.zero_grad()
            loss.backward()
            opt.step()
    return tr


def test_the_cut_whose_value_goes_on_to_the_loss_is_named_not_a_size_read_before_it():
    """brevitas' pad_to_dim: `len(t.data.shape)` (a size) is cut first, `F.pad(t.data, ...)`
    is the cut whose value the next layer and the loss use."""
    tr = _padded_model(data=True)
    f = _first(tr, "GT105")
    assert f is not None and "first.weight" in f.message
    pad_line = _pad_to.__code__.co_firstlineno + 3
    assert f.line == pad_line, (f.line, pad_line)


def test_the_size_read_alone_is_silent():
    tr = _padded_model(data=False)
    assert [f.code for f in tr.findings] == []


def _logged_then_cut(log_first: bool):
    torch.manual_seed(0)
    first, second = nn.Linear(4, 6), nn.Linear(6, 1)
    opt = torch.optim.SGD([*first.parameters(), *second.parameters()], lr=0.1)
    norms = []
    with gradtrace.trace(static=False) as tr:
        for _ in range(3):
            h = first(torch.randn(8, 4))
            if log_first:
                norms.append(h.detach().norm())  # <- log
            out = second(h.detach())  # <- cut
            if not log_first:
                norms.append(h.detach().norm())  # <- log after
            loss = out.pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return tr


def test_a_logging_detach_made_first_does_not_outrank_the_cut_handed_to_the_next_layer():
    lines, start = inspect.getsourcelines(_logged_then_cut)
    cut = start + next(i for i, l in enumerate(lines) if "# <- cut" in l)
    for log_first in (True, False):
        f = _first(_logged_then_cut(log_first), "GT107")
        assert f is not None and "weight" in f.message
        assert f.line == cut, (log_first, f.line, cut)
