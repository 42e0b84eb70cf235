"""Session 53, helper "probes53" (docs/triage/probes53.md): the mission's everyday bugs in
styles the checker missed. Each case: a buggy twin (the code reported on the line marked
``# <- GTnnn``) and a silent look-alike (no finding of that code), checked in-process."""
from __future__ import annotations

import re
import textwrap

import pytest

from gradtrace.lint import check_source

MARK = re.compile(r"#\s*<-\s*(GT\d{3})")

# (code, buggy twin, silent look-alike)
CASES: dict[str, tuple[str, str, str]] = {
    # a float64 array (`.astype(np.float64)`) made a leaf, then `.float()`: a copy, a non-leaf
    "astype-float64-then-float": ("GT305", """
        import numpy as np
        import torch
        data = np.linspace(0, 1, 12).reshape(3, 4).astype(float)
        x = torch.tensor(data, requires_grad=True).float()  # <- GT305
        (x * 2).sum().backward()
        print(x.grad)
        """, """
        import numpy as np
        import torch
        data = np.linspace(0, 1, 12).reshape(3, 4).astype(np.float32)
        x = torch.tensor(data, requires_grad=True).float()
        (x * 2).sum().backward()
        print(x.grad)
        """),
}


def _codes(src: str) -> set[tuple[str, int]]:
    return {(f.code, f.line) for f in check_source(src)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_probe_shapes(name: str) -> None:
    code, bad, good = CASES[name]
    bad, good = textwrap.dedent(bad).lstrip("\n"), textwrap.dedent(good).lstrip("\n")
    want = {(m.group(1), i) for i, line in enumerate(bad.splitlines(), 1)
            for m in MARK.finditer(line)}
    assert want and want <= _codes(bad), (want, _codes(bad))
    assert not [c for c, _ in _codes(good) if c == code], _codes(good)
