"""speed50: the steps analysis asks whether a receiver of ``.backward(`` is bound only to a
plain class with its own ``backward`` (NOTE [manual backward]); the names are judged when
asked (NOTE [owners on demand]) instead of every assigned name of the file: the same answers,
the same findings."""
from __future__ import annotations

import ast
import textwrap

from gradtrace.lint import check_source
from gradtrace.lint.analysis.built_classes import built_class
from gradtrace.lint.analysis.manual_backwards import (
    _bound, _manual, manual_backward_owners,
)
from gradtrace.lint.engine import FileChecker
from gradtrace.lint.names import dotted

LOOP = '''
import numpy as np
import torch
import torch.nn as nn


class Adder:
    def __init__(self, w):
        self.w = w

    def forward(self, x):
        return x + self.w

    def backward(self, grad):
{body}        return grad


model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
mine = Adder(np.ones(3))
{rebind}for step in range(3):
    loss = model(torch.ones(2, 3)).sum()
    opt.step()
    mine.backward(loss)
    opt.zero_grad()
'''
WITH = "with torch.no_grad() as mine:\n    pass\n"
AGAIN = "if np.random.rand() > 2:\n    mine = model\n"


def _codes(src: str) -> list[tuple[str, int]]:
    return sorted((f.code, f.line) for f in check_source(src))


def test_manual_backward_is_no_step():
    """Look-alike: `mine` only ever holds an `Adder`, whose backward runs no autograd."""
    assert _codes(LOOP.format(body="", rebind="")) == []


def test_autograd_in_the_method_is_a_step():
    """Twin: the class's backward calls `grad.backward()`: `mine.backward(loss)` steps."""
    src = LOOP.format(body="        grad.backward()\n", rebind="")
    assert _codes(src) == [("GT522", 24), ("GT609", 24)]  # `opt.step()`


def test_name_bound_by_with_or_assigned_again_is_no_owner():
    """Twins: `mine` also bound by a `with`, or assigned the model: not an owner."""
    for rebind in (WITH, AGAIN):
        src = LOOP.format(body="", rebind=rebind)
        assert _codes(src) == [("GT522", 25), ("GT609", 25)], rebind


def _eager(ctx) -> frozenset[str]:
    """The start commit's judgement of every assigned name (27312e09's ``_owners``)."""
    manual: dict[str, bool] = {}
    for n in ast.walk(ctx.tree):
        if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                name = dotted(t)
                if not name:
                    continue
                got = built_class(ctx, n.value) if isinstance(n.value, ast.Call) \
                    and isinstance(n, ast.Assign) and len(targets) == 1 else None
                ok = got is not None and _manual(got[0], got[1])
                manual[name] = manual.get(name, True) and ok
        elif isinstance(n, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith, ast.NamedExpr)):
            for t in _bound(n):
                name = dotted(t)
                if name:
                    manual[name] = False
    return frozenset(k for k, v in manual.items() if v)


MIXED = textwrap.dedent('''
    import torch

    class Plain:
        def backward(self, g):
            return g

    class Auto:
        def backward(self, loss):
            loss.backward()

    a = Plain()
    b = Plain()
    b = Auto()
    c: Plain = Plain()
    d = Plain()
    d += 1
    e = f = Plain()
    self_like = Plain()
    self_like.crit = Plain()
    if (g := Plain()):
        pass
    for h in [Plain()]:
        h = Plain()
    k = Plain()
    k.backward(torch.ones(1))
''')


def test_owners_on_demand_answer_as_every_name_judged():
    """Every dotted name of a file mixing the cases: the same verdict as judging them all."""
    tree = ast.parse(MIXED)
    ctx = FileChecker("<mixed>", MIXED, tree, []).ctx
    lazy = manual_backward_owners(ctx)
    names = {dotted(n) for n in ast.walk(tree) if isinstance(n, (ast.Name, ast.Attribute))}
    names.discard(None)
    expected = _eager(ctx)
    assert expected == {"a", "self_like", "self_like.crit", "k"}
    assert {n for n in names if n in lazy} == expected
    assert None not in lazy and 3 not in lazy
