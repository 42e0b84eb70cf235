"""Values of a graph tensor rewritten from themselves through ``.data``.

# NOTE [graph values rewritten through .data]
``t.data[:, c] = (t.data[:, c] - mean[c]) / std[c]`` on a tensor ``t`` that is itself an
intermediate result of the graph (the output of an op, not a parameter) changes the values every
later op reads, but autograd never sees the write: backward() runs the derivative of the
unmodified computation, so every gradient that passes through ``t`` misses the rewrite's own
derivative (a normalisation's ``1/std``, a rescale's factor). Nothing fails, the loss looks
right, the gradient is wrong. Generative adversarial perturbations normalised the generator's
output this way; the same shape is any per-channel normalisation, rescale or shift of an
activation written through ``.data`` (``out.data.mul_(k)``, ``h.data.copy_(h.data / n)``).

Run-time facts (no per-op work: ``.data`` reads of tensors with a graph and in-place ops on
tensors without one already go through the mode's handlers): a ``.data`` read of a non-leaf
tensor with a graph remembers the cut it records with that tensor (weakly). An in-place write on
a tensor carrying one of those cuts (the alias or a view of it) is a *rewrite from itself* when
it is an arithmetic in-place op (``mul_``, ``div_``, ``add_``, ``sub_`` and their operators:
the op reads the old values) or a ``__setitem__``/``copy_`` whose value carries a cut of the same
tensor (computed from its own ``.data``), with grad mode on. The write's line is remembered with
one pre-hook on the tensor's node; reported at the end when a backward() ran through that node
after the write. Silent: a write of constants (``masked_fill_`` of ``-inf`` before a softmax,
``fill_``, ``zero_``: the gradient of the filled entries is not used), ``clamp_`` (a
straight-through clamp), writes through ``.data`` of a leaf (parameter updates, projections of
a perturbation), the rewrite of a tensor no backward() runs through.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.frames import Site, raw_site

CODE = "GT864"
_SITES = 16
_ARITH = frozenset({"mul_", "div_", "add_", "sub_", "__imul__", "__itruediv__", "__iadd__",
                    "__isub__", "addcmul_", "addcdiv_", "pow_", "sqrt_", "exp_", "log_"})
_FROM_VALUE = frozenset({"__setitem__", "copy_"})
Tensor = torch.Tensor


@dataclass
class Rewrite:
    backwards: int  # the session's backward() count at the write
    ran: bool = False
    handle: Any = None

    def mark(self, *_: Any) -> None:
        self.ran = True


@dataclass
class _Book:
    sources: dict[int, Any]  # id(cut) -> weakref to the non-leaf tensor read through `.data`
    writes: dict[Site, Rewrite]


_BY_STATE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def note_graph_data(state: Any, cut: Any, src: Tensor) -> None:
    """``src.data`` of a non-leaf ``src`` with a graph made ``cut`` (see the NOTE)."""
    if cut is None or src.grad_fn is None:
        return
    book = _BY_STATE.get(state)
    if book is None:
        book = _BY_STATE[state] = _Book({}, {})
    if len(book.sources) < 4096 or id(cut) in book.sources:
        book.sources[id(cut)] = weakref.ref(src)


def note_rewrite(state: Any, args: tuple[Any, ...], name: str) -> None:
    """An in-place op on a tensor without grad (see the NOTE)."""
    book = _BY_STATE.get(state)
    if book is None or not torch.is_grad_enabled() or (name not in _ARITH
                                                        and name not in _FROM_VALUE):
        return
    src = _source(state, book, args[0])
    if src is None:
        return
    if name in _FROM_VALUE:
        value = args[2] if name == "__setitem__" and len(args) > 2 else \
            args[1] if name == "copy_" and len(args) > 1 else None
        if _source(state, book, value) is not src:
            return
    raw = raw_site()
    if raw is None:
        return
    site = state.site(raw)
    if site in book.writes or len(book.writes) >= _SITES:
        return
    rec = book.writes[site] = Rewrite(state.backward_count)
    try:
        rec.handle = src.grad_fn.register_prehook(rec.mark)
    except RuntimeError:  # a node that takes no hooks: nothing to watch
        del book.writes[site]


def _source(state: Any, book: _Book, t: Any) -> Any:
    cut = state.cut_of(t)
    if cut is None or cut.reason != "data":
        return None
    ref = book.sources.get(id(cut))
    return None if ref is None else ref()


def data_rewrite_findings(state: Any) -> list[Finding]:
    """GT864 at each rewrite a backward() ran through (see the NOTE)."""
    book = _BY_STATE.pop(state, None)
    if book is None or not book.writes:
        return []
    for rec in book.writes.values():
        if rec.handle is not None:
            rec.handle.remove()
            rec.handle = None
    from gradtrace.runtime.build import make

    return [make(
        CODE, site,
        "this line rewrites, through `.data`, the values of a tensor that is an intermediate "
        "result of the autograd graph, from those same values: every later op reads the new "
        "values, but backward() runs the derivative of the unmodified computation, so the "
        "gradients through this tensor miss the rewrite's own derivative",
        fix="write the operation out of place on the tensor itself (`t = (t - mean) / std`, "
            "`torch.cat`/`torch.stack` of the rewritten slices), not through `.data`",
        severity="warning")
        for site, rec in book.writes.items() if rec.ran]


__all__ = ["CODE", "data_rewrite_findings", "note_graph_data", "note_rewrite"]
