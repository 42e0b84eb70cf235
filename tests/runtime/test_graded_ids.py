"""A parameter is 'graded' only itself: a later tensor that reuses a freed parameter's id
does not inherit its record (a never-graded parameter would go unreported)."""
from __future__ import annotations

import weakref

import pytest

torch = pytest.importorskip("torch")

from gradtrace.runtime.trace.hooks import HookState  # noqa: E402


def test_reused_id_is_not_graded() -> None:
    old, new = torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(2))
    hs = HookState()
    hs.had_grad[id(old)] = weakref.ref(old)
    assert hs.graded(old) and not hs.graded(new)
    hs.had_grad[id(new)] = weakref.ref(old)  # what a reused id looks like
    assert not hs.graded(new)
    ref = hs.had_grad[id(old)]
    del old
    assert ref() is None  # the record keeps no tensor alive


def test_step_records_the_parameter_itself() -> None:
    import gradtrace
    lin = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(lin.parameters(), 0.1)
    with gradtrace.trace() as tr:
        lin(torch.randn(4, 3)).sum().backward()
        opt.step()
        assert tr.hooks.data.graded(lin.weight) and tr.hooks.data.graded(lin.bias)
    assert not any(f.code in ("GT820", "GT821") for f in tr.findings)
