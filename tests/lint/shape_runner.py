"""Run a code shape both ways: through the checker (its code on its line, or silent) and on
real torch (it raises as the finding says, or runs; ``holds`` is true afterwards)."""
from __future__ import annotations

import textwrap
from typing import NamedTuple

import pytest

from gradtrace.lint import check_source


class Shape(NamedTuple):
    src: str
    code: str
    line: int | None = None          # buggy twin: the reported line (after the prelude)
    raises: tuple[type, str] | None = None
    holds: str | None = None         # true after running it


def judge(prelude: str, shape: Shape) -> None:
    """Assert the checker's verdict on ``shape`` and what real torch does with it."""
    source = prelude + textwrap.dedent(shape.src).lstrip("\n")
    found = check_source(source, "shape.py", select=[shape.code])
    offset = prelude.count("\n")
    assert sorted((f.line - offset, f.code) for f in found) == (
        [] if shape.line is None else [(shape.line, shape.code)])
    env: dict = {}
    code = compile(source, "shape.py", "exec")
    if shape.raises is not None:
        with pytest.raises(shape.raises[0], match=shape.raises[1]):
            exec(code, env)
    else:
        exec(code, env)
    if shape.holds:
        assert eval(shape.holds, env)
