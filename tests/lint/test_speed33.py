"""speed33: the file's call index (NOTE [call index]) answers as the per-name passes do;
`word_lines` answers an absent name without building the identifiers."""
from __future__ import annotations

import ast
import re
import textwrap

import pytest

from gradtrace.lint.analysis import callees, calls, file_index
from gradtrace.lint.context import Context
from gradtrace.lint.names import Imports

SRC = textwrap.dedent('''
    import torch
    from torch import nn

    @register(make(1))
    def helper(x, scale=scale_of(2)):
        if isinstance(x, helper):
            return helper(x - 1)
        return [step(y) for y in x] + (lambda z: helper(z))(x)

    class Net(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.fc = nn.Linear(n, n)
            self.step = helper

        def forward(self, x):
            out = self.fc(x)
            out = self.step(out)
            with torch.no_grad():
                keep = helper(out).detach()
            try:
                out.backward()
            except RuntimeError:
                pass
            finally:
                log(keep)
            return type(out)(out)

    def step(model, x):
        loss = model(x).sum()
        loss.backward()
        for g in (helper, step):
            g(x)
        match x:
            case 1:
                step(model, helper(x))
        return Net(3)

    net = Net(
        4)
    while step(net, 1):
        helper(net)
''')


def _answers(ctx: Context, name: str) -> tuple:
    return (calls.call_sites(ctx, name), callees._uses(ctx, name), calls.named_calls(ctx, name))


def _same(a: tuple, b: tuple) -> bool:
    sites = len(a[0]) == len(b[0]) and all(
        x[0] is y[0] and x[1] is y[1] and len(x[2]) == len(y[2])
        and all(p is q for p, q in zip(x[2], y[2])) for x, y in zip(a[0], b[0]))
    uses = len(a[1][0]) == len(b[1][0]) and a[1][1:] == b[1][1:] and all(
        x[0] is y[0] and x[1] is y[1] for x, y in zip(a[1][0], b[1][0]))
    named = len(a[2]) == len(b[2]) and all(x[0] is y[0] and x[1] is y[1]
                                           for x, y in zip(a[2], b[2]))
    return sites and uses and named


def test_the_index_answers_every_name_as_its_own_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    tree = ast.parse(SRC)
    names = sorted(set(re.findall(r"[A-Za-z_]\w*", SRC)))
    monkeypatch.setattr(file_index, "INDEX_AFTER", 10 ** 9)  # every name by its own pass
    old = Context("f.py", SRC, tree, Imports(), SRC)
    want = {n: _answers(old, n) for n in names}
    assert old.memo("call-index", tree, list)[1] is None
    monkeypatch.setattr(file_index, "INDEX_AFTER", 0)  # every name from the index
    new = Context("f.py", SRC, tree, Imports(), SRC)
    for n in names:
        assert _same(want[n], _answers(new, n)), n
    assert new.memo("call-index", tree, list)[1] is not None
    assert len(want["helper"][0]) == 5 and want["helper"][1][1]  # also read as a value
    assert want["step"][1][2] and not want["fc"][1][1]  # `self.step` read; `fc` only called
    old.release(), new.release()


def test_the_index_is_built_after_many_distinct_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_index, "INDEX_AFTER", 3)
    tree = ast.parse(SRC)
    ctx = Context("f.py", SRC, tree, Imports(), SRC)
    for name in ("helper", "step", "helper", "Net", "step"):  # three distinct names
        calls.call_sites(ctx, name), callees._uses(ctx, name)
    assert ctx.memo("call-index", tree, list)[1] is None
    calls.named_calls(ctx, "log")  # the fourth
    assert ctx.memo("call-index", tree, list)[1] is not None
    ctx.release()


def test_word_lines_of_an_absent_name_builds_no_identifiers() -> None:
    tree = ast.parse(SRC)
    ctx = Context("f.py", SRC, tree, Imports(), SRC)
    assert calls.word_lines(ctx, ("absent_name",)) == []
    assert calls.word_lines(ctx, ("keep",)) == [21, 27]
    assert ctx._idents is False
    ctx.release()


def test_the_averages_and_gt220_gates_build_no_identifiers() -> None:
    from gradtrace.lint.analysis.averages import folding_classes
    from gradtrace.lint.rules.grad_mode.never_with_grad import TrainedModuleRunOnlyWithoutGrad
    tree = ast.parse(SRC)
    ctx = Context("f.py", SRC, tree, Imports(), SRC)
    assert folding_classes(ctx) == {}  # no `zip` in the code
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    assert list(TrainedModuleRunOnlyWithoutGrad().visit_ClassDef(cls, ctx)) == []  # no `parameters`
    assert ctx._idents is False
    ctx.release()
