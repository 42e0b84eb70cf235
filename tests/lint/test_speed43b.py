"""speed43b: quadratic scans of a script's module body taken out (issue 12), with the answers
they must keep. Each test builds a module-level script of many training blocks (the shape of
``benchmarks/check_scaling.py``), so a wrong line range picks the wrong statements.

- GT503 ``_called_steps`` / ``_grads_written``: the statements between two lines come from
  ``LoopFacts.stmts_between`` (one line index per function), not a scan of ``scope.stmts`` per
  ``zero_grad``.
"""
from __future__ import annotations

import ast
import textwrap

from gradtrace.lint import check_source

HEAD = """\
import torch
import torch.nn as nn


def update(opt):
    opt.step()


model = nn.Linear(4, 1)
"""

CLEAN = """
opt{k} = torch.optim.SGD(model.parameters(), lr=0.1)
for x in [torch.randn(2, 4)]:
    opt{k}.zero_grad()
    loss{k} = model(x).sum()
    loss{k}.backward()
    update(opt{k})
"""

# the clear between backward and a helper's step (NOTE [step one call away])
BUGGY = """
opt{k} = torch.optim.SGD(model.parameters(), lr=0.1)
for x in [torch.randn(2, 4)]:
    loss{k} = model(x).sum()
    loss{k}.backward()
    opt{k}.zero_grad()
    update(opt{k})
"""

# the same clear, then gradients written by hand before the step: the step applies those
WRITTEN = """
opt{k} = torch.optim.SGD(model.parameters(), lr=0.1)
for x in [torch.randn(2, 4)]:
    loss{k} = model(x).sum()
    loss{k}.backward()
    opt{k}.zero_grad()
    model.weight.grad = torch.ones_like(model.weight)
    opt{k}.step()
"""

# the clear after the step: correct order
AFTER = """
opt{k} = torch.optim.SGD(model.parameters(), lr=0.1)
for x in [torch.randn(2, 4)]:
    loss{k} = model(x).sum()
    loss{k}.backward()
    update(opt{k})
    opt{k}.zero_grad()
"""


def _script(middle: str, n: int = 12) -> str:
    parts = [HEAD] + [CLEAN.format(k=k) for k in range(n)]
    parts.insert(1 + n // 2, middle.format(k=n))
    return "".join(parts)


def _found(src: str, code: str) -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in check_source(src, select=[code])]


def _line_of(src: str, text: str) -> int:
    return next(i for i, ln in enumerate(src.splitlines(), 1) if ln.strip() == text)


def test_clear_before_a_helper_step_in_a_long_script() -> None:
    src = _script(BUGGY)
    ast.parse(src)
    assert _found(src, "GT503") == [("GT503", _line_of(src, "opt12.zero_grad()"))]


def test_clear_then_grads_written_in_a_long_script_is_silent() -> None:
    assert _found(_script(WRITTEN), "GT503") == []


def test_clear_after_the_helper_step_in_a_long_script_is_silent() -> None:
    assert _found(_script(AFTER), "GT503") == []


def test_clean_script_is_silent() -> None:
    assert _found(_script(CLEAN), "GT503") == []


def test_buggy_first_and_last_block() -> None:
    """The range's ends: the buggy block first and last in the script."""
    for src in (HEAD + BUGGY.format(k=99) + "".join(CLEAN.format(k=k) for k in range(5)),
                HEAD + "".join(CLEAN.format(k=k) for k in range(5)) + BUGGY.format(k=99)):
        assert _found(src, "GT503") == [("GT503", _line_of(src, "opt99.zero_grad()"))]
