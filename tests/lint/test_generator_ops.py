"""GT449: a parameters() generator used as a list. Buggy twins (other spellings than the rule's
examples) are reported on their line and raise on real torch; the look-alikes (chain, lists
joined, next()) stay silent and run.

Same harness as test_heldout_shapes.py.
"""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _run

torch = pytest.importorskip("torch")

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    "parameters-generator-as-list": (Shape("""
        from itertools import chain

        class Crf(nn.Module):
            def __init__(self):
                super().__init__()
                self.r, self.g = nn.Linear(1, 4), nn.Linear(1, 4)

        crf, head = Crf(), nn.Linear(4, 1)
        warm = torch.optim.Adam(chain(crf.r.parameters(), crf.g.parameters()), lr=1e-3)
        both = list(crf.parameters()) + list(head.parameters())
        opt = torch.optim.SGD(both, lr=0.1)
        w = next(head.parameters())
        n_layers = sum(1 for _ in crf.children())
        """, "GT449", holds="n_layers == 2 and len(both) == 6"), [Shape("""
        class Crf(nn.Module):
            def __init__(self):
                super().__init__()
                self.r, self.g = nn.Linear(1, 4), nn.Linear(1, 4)

            def warm_params(self):
                return self.r.parameters() + self.g.parameters()

        crf = Crf()
        opt = torch.optim.Adam(crf.warm_params(), lr=1e-3)
        """, "GT449", 7, "unsupported operand"), Shape("""
        net = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
        params = net.parameters()
        print("first weight", params[0].shape)
        """, "GT449", 3, "not subscriptable"), Shape("""
        encoder = nn.GRU(4, 8)
        n = len(encoder.named_parameters())
        """, "GT449", 2, "has no len")]),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    good, _ = SHAPES[name]
    assert _found(good) == []
    _run(good)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twins_are_reported_and_raise(name: str) -> None:
    _, bads = SHAPES[name]
    for bad in bads:
        assert _found(bad) == [(bad.line, bad.code)], bad.src
        _run(bad)
