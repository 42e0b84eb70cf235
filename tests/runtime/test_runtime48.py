"""runtime48 on real torch, one process, a few steps, tiny models.

- NOTE [slice written back on its own line] (GT602): a rotary helper takes complex views of
  the slice it is given (``reshape``, ``view_as_complex``) and multiplies them, and the caller
  writes its result back into that slice on the same statement: backward() fails, named at
  that statement. Crash look-alike: the view taken on one line and written back on another
  (the view's line stays named). Silent: the result joined out of place with ``torch.cat``.
"""
from __future__ import annotations

import pytest

from tests.runtime.rt_helpers import marked_line

torch = pytest.importorskip("torch")

ROPE = """
import torch
import torch.nn as nn
torch.manual_seed(0)


def rotate(x, freqs):
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * freqs).flatten(-2)


proj = nn.Linear(4, 8)
angles = nn.Parameter(torch.randn(3, 2))


def attend(h):
    freqs = torch.polar(torch.ones_like(angles), angles)
    qk = proj(h)
    q, k = qk[..., :4], qk[..., 4:]
    WRITE
    return (q * k).sum()


for step in range(2):
    loss = attend(torch.randn(2, 4, 4))
    loss.backward()
"""


def _codes(res: object) -> list[tuple[str, int]]:
    return [(f["code"], f["line"]) for f in res.findings]  # type: ignore[attr-defined]


def test_slice_written_back_on_its_own_line_is_named(run_script):
    src = ROPE.replace("WRITE", "q[:, 1:] = rotate(q[:, 1:], freqs)  # <- cause")
    res = run_script(src)
    assert res.code != 0
    assert _codes(res)[:1] == [("GT602", marked_line(src))], res.findings


def test_view_taken_on_another_line_keeps_the_view_named(run_script):
    src = ROPE.replace("WRITE", "tail = torch.view_as_complex(q[:, 1:].reshape(2, 3, 2, 2))  # <- view\n"
                                "    q[:, 1:] = torch.view_as_real(tail * freqs).flatten(-2)")
    res = run_script(src)
    assert res.code != 0
    assert _codes(res)[:1] == [("GT602", marked_line(src, "# <- view"))], res.findings


def test_result_joined_out_of_place_is_silent(run_script):
    src = ROPE.replace("WRITE", "q = torch.cat([q[:, :1], rotate(q[:, 1:], freqs)], 1)")
    res = run_script(src)
    assert res.code == 0, res.err
    assert not [c for c in _codes(res) if c[0] == "GT602"], res.findings
