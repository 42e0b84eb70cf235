"""GT709: a non-tensor given to ctx.save_for_backward. Buggy twins (other spellings than the
rule's example and the real-world case) are reported on their line and raise on real torch; the
look-alike (sizes kept on ctx, None saved) stays silent and runs backward.

Same harness as test_heldout_shapes.py.
"""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _run

torch = pytest.importorskip("torch")

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    "non-tensor-saved-for-backward": (Shape("""
        class Gather(torch.autograd.Function):
            @staticmethod
            def forward(ctx, src, index, dim, bias=None):
                ctx.dim, ctx.src_shape = dim, src.shape
                ctx.save_for_backward(index, bias)
                return src.gather(dim, index)

            @staticmethod
            def backward(ctx, g):
                index, _ = ctx.saved_tensors
                grad = g.new_zeros(ctx.src_shape).scatter_add_(ctx.dim, index, g)
                return grad, None, None, None

        src = torch.randn(3, 4, requires_grad=True)
        out = Gather.apply(src, torch.tensor([[0], [1], [2]]), 1)
        out.sum().backward()
        """, "GT709", holds="src.grad is not None"), [Shape("""
        class Gather(torch.autograd.Function):
            @staticmethod
            def forward(ctx, src, index, dim):
                ctx.save_for_backward(index, dim)
                return src.gather(dim, index)

            @staticmethod
            def backward(ctx, g):
                index, dim = ctx.saved_tensors
                return None, None, None

        gather = Gather.apply
        out = gather(torch.randn(3, 4, requires_grad=True), torch.tensor([[0], [1], [2]]), 1)
        """, "GT709", 4, "can only save"), Shape("""
        class Flip(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x, x.shape)
                return x.flip(0)

            @staticmethod
            def backward(ctx, g):
                return g.flip(0)

        y = Flip.apply(torch.randn(5, requires_grad=True))
        """, "GT709", 4, "can only save")]),
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
