"""GT418: an empty ModuleList / ParameterList / Sequential filled by item assignment. Buggy twins
(other spellings than the rule's example) are reported on their line and raise on real torch;
the look-alikes (appended first, built from a list, replaced items) stay silent and build.

Same harness as test_heldout_shapes.py.
"""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _run

torch = pytest.importorskip("torch")

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    "module-list-filled-by-index": (Shape("""
        def make_heads(n):
            heads = nn.ModuleList([nn.Linear(4, 2) for _ in range(n)])
            heads[0] = nn.Linear(4, 3)
            scales = nn.ParameterList()
            for i in range(n):
                scales.append(nn.Parameter(torch.ones(2)))
            scales[n - 1] = nn.Parameter(torch.zeros(2))
            return heads, scales

        heads, scales = make_heads(3)
        """, "GT418", holds="len(heads) == 3 and len(scales) == 3"), [Shape("""
        def make_scales(n):
            scales = nn.ParameterList([])
            for i in range(n):
                scales[i] = nn.Parameter(torch.ones(2))
            return scales

        make_scales(2)
        """, "GT418", 4, "out of range"), Shape("""
        class Tower(nn.Module):
            def __init__(self, depth):
                super().__init__()
                self.stages = nn.Sequential()
                k = 0
                while k < depth:
                    self.stages[k] = nn.Linear(4, 4)
                    k += 1

        Tower(2)
        """, "GT418", 7, "out of range")]),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_builds(name: str) -> None:
    good, _ = SHAPES[name]
    assert _found(good) == []
    _run(good)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twins_are_reported_and_raise(name: str) -> None:
    _, bads = SHAPES[name]
    for bad in bads:
        assert _found(bad) == [(bad.line, bad.code)], bad.src
        _run(bad)
