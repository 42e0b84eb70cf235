"""Session 40 (prec40): false alarms of unseen code closed by the fact each lacked
(docs/triage/prec40.md). Each look-alike is the false-alarm shape (silent, and it runs as the
code means it); each buggy twin is the same code with the evidence present (reported at the
line, and it shows the error or the silent loss the message names)."""
from __future__ import annotations

import runpy
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")


def _write(root: Path, text: str, name: str = "case.py") -> Path:
    p = root / name
    p.write_text(textwrap.dedent(text).lstrip("\n"))
    return p


def _found(path: Path, code: str) -> list[tuple[str, int]]:
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    got = check_paths([str(path)], Settings()).findings
    return sorted((f.code, f.line) for f in got if f.code == code)


# -- GT708: a notebook's displayed line (NOTE [receiver shown next]) ---------------------------
# udacity's DL_PyTorch: `z.add(1)` ends a cell (shown), the next cell shows `z` unchanged, the
# one after calls `z.add_(1)`. A bare name as a statement does nothing in a script: the lines
# display values. The twin drops the display: the clipping is meant and never happens.

_SHOWN = '''
import torch

x = torch.rand(3, 2)
x

z = x + torch.ones(x.size())
z

z.add(1)

z

z.add_(1)
z
'''

_CLIPPED = '''
import torch

w = torch.randn(10) * 5
w

w.clamp(-1, 1)

scale = w.abs().max()
'''


def test_out_of_place_op_shown_then_its_receiver_is_silent(tmp_path: Path) -> None:
    p = _write(tmp_path, _SHOWN)
    assert _found(p, "GT708") == []
    ns = runpy.run_path(str(p))
    assert torch.equal(ns["z"], ns["x"] + 2)  # `add` changed nothing, `add_` did


def test_out_of_place_clip_read_afterwards_is_reported(tmp_path: Path) -> None:
    p = _write(tmp_path, _CLIPPED)
    assert _found(p, "GT708") == [("GT708", 6)]
    torch.manual_seed(0)
    ns = runpy.run_path(str(p))
    assert ns["scale"] > 1  # the clipping never happened
