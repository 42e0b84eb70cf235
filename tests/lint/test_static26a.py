"""static26a (issue 13 parts 2-3): mechanisms from the graph_breaks, grad_mode and leaf misses,
each with a silent look-alike that trains and buggy twins in other spellings (a script, a
function, a method), reported on the line a maintainer changes, run on real torch."""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _run

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    # GT307, mechanism: the binding made the name a non-leaf (a leaf's name rebound to a
    # tensor computed from it, a name bound to a helper's result): reported at the binding,
    # where the fix goes; a view under a new name with the leaf's `.grad` read is correct
    "grad-of-name-made-non-leaf-by-its-binding": (Shape("""
        scale = torch.linspace(0.5, 1.5, 6, requires_grad=True)
        grid = scale.reshape(2, 3)
        (grid * torch.randn(2, 3)).sum().backward()
        g = scale.grad
        """, "GT307", holds="g is not None"), [Shape("""
        def probe(n):
            gain = torch.ones(n, requires_grad=True)
            gain = gain * 2.0
            (gain ** 2).sum().backward()
            return gain.grad

        g = probe(3)
        """, "GT307", 3, holds="g is None"), Shape("""
        class Jitter:
            def __init__(self, sigma):
                self.sigma = sigma

            def apply(self, images):
                return images + self.sigma * torch.randn_like(images)

        net = nn.Linear(4, 2)
        base = torch.rand(3, 4, requires_grad=True)
        jitter = Jitter(0.1)
        noisy = jitter.apply(base)
        net(noisy).sum().backward()
        sal = noisy.grad
        """, "GT307", 11, holds="sal is None and base.grad is not None")]),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    good, _ = SHAPES[name]
    assert _found(good) == []
    _run(good)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twins_are_reported_and_fail(name: str) -> None:
    _, bads = SHAPES[name]
    assert len(bads) >= 2
    for bad in bads:
        assert _found(bad) == ([] if bad.line is None else [(bad.line, bad.code)]), bad.src
        _run(bad)
