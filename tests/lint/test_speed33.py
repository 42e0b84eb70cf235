"""speed33: `word_lines`, the averages' gate and GT220's class gate answer without building
the identifiers (the call index tried and dropped: docs/triage/speed33.md)."""
from __future__ import annotations

import ast
import textwrap

from gradtrace.lint.analysis import calls
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
