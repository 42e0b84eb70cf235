"""GT759: scores filled with +inf before a softmax. The look-alikes (a -inf fill, a +inf fill
read by a min) stay silent and stay finite; the buggy twins (other spellings than the rule's
examples and the real-world case) are reported on their line and give NaN on real torch.

Same harness as test_heldout_shapes.py.
"""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _run

torch = pytest.importorskip("torch")

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    "positive-infinity-into-softmax": (Shape("""
        import math

        class Attn(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.qk = nn.Linear(d, 2 * d)

            def forward(self, x):
                q, k = self.qk(x).chunk(2, -1)
                s = q @ k.transpose(-1, -2)
                causal = torch.ones(x.shape[1], x.shape[1]).triu(1).bool()
                s = s.masked_fill(causal, -math.inf)
                return F.softmax(s, dim=-1) @ x

        def nearest_other(e):
            d = torch.cdist(e, e)
            d = d.masked_fill(torch.eye(e.shape[0], dtype=torch.bool), float("inf"))
            return d.min(dim=1).values

        m = Attn(8)
        out = m(torch.randn(2, 5, 8))
        out.sum().backward()
        gap = nearest_other(torch.randn(6, 3))
        """, "GT759", holds="torch.isfinite(out).all() and torch.isfinite(gap).all()"), [Shape("""
        import math

        def causal_scores(q, k):
            s = q @ k.transpose(-1, -2)
            upper = torch.ones(s.shape[-1], s.shape[-1]).triu(1).bool()
            return F.softmax(torch.masked_fill(s, upper, math.inf), dim=-1)

        q = torch.randn(2, 4, 8, requires_grad=True)
        p = causal_scores(q, torch.randn(2, 4, 8))
        p.sum().backward()
        """, "GT759", 6, holds="torch.isnan(p).any()"), Shape("""
        import numpy as np

        class Pool(nn.Module):
            def __init__(self):
                super().__init__()
                self.score = nn.Linear(8, 1)
                self.norm = nn.Softmax(dim=1)

            def forward(self, h, pad):
                w = self.score(h).squeeze(-1)
                w.masked_fill_(pad, np.inf)
                return (self.norm(w).unsqueeze(-1) * h).sum(1)

        pool = Pool()
        pad = torch.zeros(3, 5, dtype=torch.bool)
        pad[:, 3:] = True
        y = pool(torch.randn(3, 5, 8), pad)
        """, "GT759", 11, holds="torch.isnan(y).any()")]),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_finite(name: str) -> None:
    good, _ = SHAPES[name]
    assert _found(good) == []
    _run(good)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twins_are_reported_and_nan(name: str) -> None:
    _, bads = SHAPES[name]
    assert len(bads) >= 2
    for bad in bads:
        assert _found(bad) == [(bad.line, bad.code)], bad.src
        _run(bad)
