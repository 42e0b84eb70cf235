"""GT751-GT754 (non-finite gradients): each buggy twin fires on its line and, run on real torch,
gives a non-finite gradient; each look-alike stays silent and gives finite gradients."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

PRELUDE = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"

# (source after the prelude, code, line of the finding (1-based after the prelude) or None for
#  a look-alike, the leaf whose gradient is checked)
CASES = [
    # GT751: the where tests the value the singular op consumes
    ("""
     x = torch.tensor([-1.0, 0.0, 4.0], requires_grad=True)
     y = torch.where(x > 0, torch.sqrt(x), torch.zeros_like(x))
     y.sum().backward()
     """, "GT751", 2, "x"),
    ("""
     def capped(v, limit):
         keep = v <= limit
         return torch.where(keep, v.exp(), torch.ones_like(v))

     x = torch.tensor([1.0, 1e4], requires_grad=True)
     capped(x, torch.tensor(10.0)).sum().backward()
     """, "GT751", 3, "x"),
    ("""
     p = torch.tensor([0.0, 0.5], requires_grad=True)
     out = torch.log(p).masked_fill(p == 0, 0.0)
     out.sum().backward()
     """, "GT751", 2, "p"),
    ("""
     g = torch.tensor([1.0, 100.0], requires_grad=True)
     soft = torch.where(g > 20.0, g, torch.log(1.0 + torch.exp(g)))
     soft.sum().backward()
     """, "GT751", 2, "g"),
    ("""
     x = torch.tensor([-1.0, 0.0, 4.0], requires_grad=True)
     safe = torch.where(x > 0, x, torch.ones_like(x))
     y = torch.where(x > 0, torch.sqrt(safe), torch.zeros_like(x))
     y.sum().backward()
     """, "GT751", None, "x"),
    ("""
     x = torch.tensor([0.5, 3.0], requires_grad=True)
     y = torch.where(x >= 1, x - 1, torch.log(x))
     y.sum().backward()
     """, "GT751", None, "x"),
    ("""
     g = torch.tensor([1.0, 100.0], requires_grad=True)
     soft = torch.where(g > 20.0, g, torch.log1p(torch.exp(g.clamp(max=20.0))))
     soft.sum().backward()
     """, "GT751", None, "g"),
    # GT752: acos of a value clamped to exactly +-1
    ("""
     net = nn.Linear(3, 3, bias=False)
     with torch.no_grad():
         net.weight.copy_(torch.eye(3))
     x = torch.tensor([[1.0, 0.0, 0.0]])
     cos = F.cosine_similarity(net(x), x, dim=1).clamp(min=-1, max=1)
     angle = torch.acos(cos)
     angle.mean().backward()
     """, "GT752", 6, "net.weight"),
    ("""
     net = nn.Linear(3, 3, bias=False)
     with torch.no_grad():
         net.weight.copy_(torch.eye(3))
     x = torch.tensor([[1.0, 0.0, 0.0]])
     eps = 1e-7
     cos = F.cosine_similarity(net(x), x, dim=1).clamp(-1 + eps, 1 - eps)
     torch.acos(cos).mean().backward()
     """, "GT752", None, "net.weight"),
    # GT753: sqrt of a hand-written squared distance / of 1 - cos^2
    ("""
     class EdgeLoss:
         def lengths(self, a, b):
             return torch.sqrt(((a - b) ** 2).sum(-1))

         def __call__(self, a, b):
             return self.lengths(a, b).mean()

     v = torch.tensor([[0.0, 0.0], [0.0, 0.0]], requires_grad=True)
     EdgeLoss()(v[:1], v[1:]).backward()
     """, "GT753", 3, "v"),
    ("""
     class Margin(nn.Module):
         def forward(self, cosine):
             sine = (1.0 - cosine * cosine).sqrt()
             return cosine * 0.9 - sine * 0.1

     c = torch.tensor([1.0, 0.5], requires_grad=True)
     Margin()(c).sum().backward()
     """, "GT753", 3, "c"),
    ("""
     class EdgeLoss:
         def lengths(self, a, b):
             return torch.linalg.norm(a - b, dim=-1)

         def __call__(self, a, b):
             return self.lengths(a, b).mean()

     v = torch.tensor([[0.0, 0.0], [0.0, 0.0]], requires_grad=True)
     EdgeLoss()(v[:1], v[1:]).backward()
     """, "GT753", None, "v"),
    ("""
     class Margin(nn.Module):
         def forward(self, cosine):
             sine = (1.0 - cosine * cosine).clamp(min=1e-7).sqrt()
             return cosine * 0.9 - sine * 0.1

     c = torch.tensor([1.0, 0.5], requires_grad=True)
     Margin()(c).sum().backward()
     """, "GT753", None, "c"),
    # GT754: the guard bounds the output of rsqrt/log
    ("""
     def normalize(x, eps=1e-12):
         s = torch.sum(torch.square(x), dim=-1, keepdim=True)
         inv = torch.rsqrt(s)
         inv = torch.minimum(inv, torch.tensor(1.0 / eps))
         return x * inv

     x = torch.tensor([[3.0, 4.0], [0.0, 0.0]], requires_grad=True)
     normalize(x).sum().backward()
     """, "GT754", 3, "x"),
    ("""
     def bce_loss(p, y):
         return -(y * p.log().clamp(min=-100) + (1 - y) * (1 - p).log().clamp(min=-100)).mean()

     p = torch.tensor([0.0, 0.5], requires_grad=True)
     bce_loss(p, torch.tensor([1.0, 0.0])).backward()
     """, "GT754", 2, "p"),
    ("""
     def normalize(x, eps=1e-12):
         s = torch.sum(torch.square(x), dim=-1, keepdim=True)
         inv = torch.rsqrt(s.clamp(min=eps))
         return x * inv

     x = torch.tensor([[3.0, 4.0], [0.0, 0.0]], requires_grad=True)
     normalize(x).sum().backward()
     """, "GT754", None, "x"),
]


@pytest.mark.parametrize("src,code,line,leaf", CASES,
                         ids=[f"{c[1]}-{'bad' if c[2] else 'ok'}-{i}"
                              for i, c in enumerate(CASES)])
def test_finding_matches_torch(src: str, code: str, line: int | None, leaf: str) -> None:
    body = textwrap.dedent(src).strip("\n") + "\n"
    text = PRELUDE + body
    found = [f for f in check_source(text, "snippet.py") if f.code == code]
    offset = PRELUDE.count("\n")
    if line is None:
        assert found == []
    else:
        assert found and {f.line - offset for f in found} == {line}
    scope: dict = {}
    exec(compile(text, "snippet.py", "exec"), scope)  # noqa: S102 - the snippet is the test
    grad = eval(leaf, scope).grad  # noqa: S307
    assert grad is not None
    assert bool(torch.isfinite(grad).all()) is (line is None)
