"""The lead's static change of session 30: GT220 names the no-grad decorator of a training
object's method that runs the optimized module (NOTE [grad-off method of a trainer]), the
line the fix removes; a `with` block keeps the call inside it (cic's label)."""
from __future__ import annotations

from gradtrace.lint import check_source

SOLVER = '''
import torch
import torch.nn as nn


class Solver:
    def __init__(self):
        self.encoder = nn.Linear(4, 4)
        self.head = nn.Linear(4, 1)
        self.opt = torch.optim.SGD([*self.encoder.parameters(), *self.head.parameters()])

    {deco}
    def prepare(self, x):
        return torch.relu(self.encoder(x))

    def step(self, x, y):
        feats = self.prepare(x)
        self.opt.zero_grad()
        nn.functional.mse_loss(self.head(feats), y).backward()
        self.opt.step()
'''

WITH = '''
import torch
import torch.nn as nn


class Solver:
    def __init__(self):
        self.encoder = nn.Linear(4, 4)
        self.head = nn.Linear(4, 1)
        self.opt = torch.optim.SGD([*self.encoder.parameters(), *self.head.parameters()])

    def step(self, x, y):
        with torch.no_grad():
            feats = self.encoder(x)
        self.opt.zero_grad()
        nn.functional.mse_loss(self.head(feats), y).backward()
        self.opt.step()
'''


def _gt220(src: str) -> list[tuple[int, list[int]]]:
    return [(f.line, [r.line for r in f.related]) for f in check_source(src)
            if f.code == "GT220"]


def test_decorated_method_is_named_at_its_decorator():
    src = SOLVER.replace("{deco}", "@torch.no_grad()")
    assert _gt220(src) == [(12, [14, 10])]


def test_inference_mode_decorator_too():
    src = SOLVER.replace("{deco}", "@torch.inference_mode()")
    assert _gt220(src) == [(12, [14, 10])]


def test_method_with_grad_is_silent():
    assert _gt220(SOLVER.replace("{deco}", "")) == []


def test_with_block_keeps_the_call():
    assert [line for line, _ in _gt220(WITH)] == [14]
