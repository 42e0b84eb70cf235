"""In-place shapes (GT602, GT603, GT601): each buggy twin fires on its line and, run on real
torch, raises the error the finding names; each look-alike stays silent and runs."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

PRELUDE = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
MODIFIED = "modified by an inplace operation|leaf Variable that requires grad"

# (source after the prelude, code, line (1-based after the prelude) or None for a look-alike)
CASES = [
    # a script: a sigmoid output written by index, then backward
    ("""
     a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
     b = a.sigmoid()
     b[1] = 2
     b.sum().backward()
     """, "GT602", 3),
    ("""
     a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
     b = 1 / ((-a).exp() + 1)
     b[1] = 2
     b.sum().backward()
     """, "GT602", None),
    # the residual added into the output of a Sequential that ends in a ReLU
    ("""
     class Block(nn.Module):
         def __init__(self, c=4):
             super().__init__()
             self.left = nn.Sequential(
                 nn.Conv2d(c, c, 3, padding=1),
                 nn.ReLU(inplace=True),
             )

         def forward(self, x):
             out = self.left(x)
             out += x
             return out

     Block()(torch.randn(1, 4, 5, 5)).sum().backward()
     """, "GT603", 11),
    ("""
     class Block(nn.Module):
         def __init__(self, c=4):
             super().__init__()
             self.left = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.ReLU())
             self.act = nn.ReLU()

         def forward(self, x):
             out = self.left(x)
             out = out + x
             return self.act(out)

     Block()(torch.randn(1, 4, 5, 5)).sum().backward()
     """, "GT603", None),
    # a weight made by a same-file helper, then changed in place in the script / in a loop
    ("""
     def init_params(size, std=1.0):
         return (torch.randn(size) * std).requires_grad_()

     weights = init_params((6, 1))
     weights[0] *= 1.0001
     """, "GT302", 5),
    ("""
     def init_params(size, std=1.0):
         return (torch.randn(size) * std).requires_grad_()

     def train(x):
         w = init_params((4, 1))
         (x @ w).sum().backward()
         w -= 0.1 * w.grad

     train(torch.randn(2, 4))
     """, "GT302", 7),
    ("""
     def init_params(size, std=1.0):
         return (torch.randn(size) * std).requires_grad_()

     weights = init_params((6, 1))
     weights[0].data *= 1.0001
     with torch.no_grad():
         weights[1] *= 1.0001
     """, "GT302", None),
]


@pytest.mark.parametrize("src,code,line", CASES,
                         ids=[f"{c[1]}-{'bad' if c[2] else 'ok'}-{i}"
                              for i, c in enumerate(CASES)])
def test_finding_matches_torch(src: str, code: str, line: int | None) -> None:
    text = PRELUDE + textwrap.dedent(src).strip("\n") + "\n"
    found = [f.line - PRELUDE.count("\n") for f in check_source(text, "snippet.py")
             if f.code == code]
    assert found == ([] if line is None else [line])
    scope: dict = {}
    if line is None:
        exec(compile(text, "snippet.py", "exec"), scope)  # noqa: S102 - the snippet is the test
    else:
        with pytest.raises(RuntimeError, match=MODIFIED):
            exec(compile(text, "snippet.py", "exec"), scope)  # noqa: S102
