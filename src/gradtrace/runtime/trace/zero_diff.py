"""A value minus its own straight-through copy: a difference whose gradient is exactly zero.

# NOTE [difference with its straight-through copy]
The straight-through estimator ``q_st = x + (q - x).detach()`` has the value of ``q`` and the
derivative of ``x``: with respect to ``x`` it is the identity. A difference ``x - q_st`` (or
``q_st - x``) therefore has value ``x - q`` and derivative ``I - I = 0`` with respect to ``x``:
it carries a graph, backward() runs through it, and every gradient it sends back is exactly
zero. Residual vector quantizers (EnCodec's and vector-quantize-pytorch's
``residual = residual - quantized``, SoundStream/DAC-style RVQs) feed the next layer this
residual, so from the second layer on the commitment losses never reach the encoder, and no
error says so. The static check's GT130 sees the pattern when the straight-through expression
is written on the very name the residual holds; the run sees through what the code hides:
``transpose``/``permute``/``clone`` between the two (EnCodec transposes into and out of the
quantizer), helpers and layers in between, the expression in another module.

Run-time facts, no per-op work beyond the ``add``/``sub`` calls the mode already classifies
(``COMBINE``, NOTE [dead loss term]):

* an ``add`` of a tensor with a graph and a tensor the run saw come out of ``.detach()`` /
  ``.data`` (a recorded cut) is a straight-through expression: its node is tagged;
* a ``sub`` of two tensors with a graph: the second operand's graph is walked down (at most
  ``_DEPTH`` nodes) through tagged adds (the detached side has no edge; an add with the graph
  operand second counts only with ``alpha == 1``), ``x - c`` with a constant ``c``, and
  shape-only nodes (transpose, permute, clone, alias, module hook pass-throughs), composing the
  axis permutation; it must reach the first operand's node (its ``AccumulateGrad`` for a leaf)
  with the identity permutation and the same shape, and the same the other way round. Nothing
  reduces or broadcasts on the way (the shapes match and no allowed node changes the number of
  elements), so the Jacobian of the difference is exactly zero.

The finding (at the ``sub``'s line, once per line, reported at the end of a run that called
backward()) names the straight-through add as related. Silent: ``x - q_st.detach()`` (the fix:
no graph on the right), ``x - q`` of the plain code vector, an add whose constant is not a
detached value (``x + noise``), a straight-through output used anywhere but in a difference with
its own input.
"""
from __future__ import annotations

import weakref
from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.frames import Site, raw_site
from gradtrace.runtime.trace.classify import call_name
from gradtrace.runtime.trace.mode_checks import _oops
from gradtrace.runtime.trace.records import created_site
from gradtrace.runtime.trace.self_diff import note_self_difference
from gradtrace.runtime.trace.st_loss import META_ST

KIND = "residual-minus-straight-through"  # its static twin: GT130
_DEPTH = 12
_SITES = 16
_ADDS = frozenset({"add", "__add__", "__radd__"})
_SUBS = frozenset({"sub", "__sub__", "subtract"})
_CUT_REASONS = frozenset({"detach", "data"})
_PASS = frozenset({"CloneBackward0", "AliasBackward0", "BackwardHookFunctionBackward",
                   "ToCopyBackward0"})
_WALKED = _PASS | {"AddBackward0", "SubBackward0", "TransposeBackward0", "PermuteBackward0"}
_BY_STATE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_LAST: list[Any] = [None]  # the site of the cut of the straight-through add being made
Tensor = torch.Tensor


def on_combine(state: Any, func: Any, args: tuple[Any, ...]) -> bool:
    """From the mode's ``COMBINE`` branch: True for a straight-through add (the mode then
    tags its result with :func:`tag`); a difference is checked here. Never raises."""
    try:
        if len(args) < 2:
            return False
        if straight_through_add(state, func, args):
            return True
        note_difference(state, func, args)
        note_self_difference(state, call_name(func), args[0], args[1])
    except Exception as exc:  # recording must never break the user's program
        _oops(exc)
    return False


def straight_through_add(state: Any, func: Any, args: tuple[Any, ...]) -> bool:
    """``x + d`` with ``x`` in the graph and ``d`` a recorded ``.detach()``/``.data`` result."""
    if len(args) < 2 or call_name(func) not in _ADDS:
        return False
    a, b = args[0], args[1]
    if not (isinstance(a, Tensor) and isinstance(b, Tensor)) or a.requires_grad == b.requires_grad:
        return False
    const = a if b.requires_grad else b
    hit = state.cuts.get(id(const))
    if hit is None or hit[0]() is not const or hit[1].reason not in _CUT_REASONS:
        return False
    _LAST[0] = hit[1].site  # tag() reads it: NOTE [loss on the straight-through output]
    return True


def tag(out: Any) -> None:
    """Mark the straight-through add's node (after the call) with its cut's site."""
    gf = getattr(out, "grad_fn", None)
    if gf is not None and type(gf).__name__ == "AddBackward0":
        gf.metadata[META_ST] = _LAST[0] or True


def note_difference(state: Any, func: Any, args: tuple[Any, ...]) -> None:
    """``a - b`` with both in the graph: remember the line when its gradient is exactly zero."""
    if len(args) < 2 or call_name(func) not in _SUBS:
        return
    a, b = args[0], args[1]
    if not (isinstance(a, Tensor) and isinstance(b, Tensor) and a.requires_grad
            and b.requires_grad):
        return
    first_a, first_b = type(a.grad_fn).__name__, type(b.grad_fn).__name__
    if first_a not in _WALKED and first_b not in _WALKED or a.shape != b.shape:
        return  # (the common case: neither operand's last op is one the walk can pass)
    st = _copy_of(b, a) if first_b in _WALKED else None
    if st is None and first_a in _WALKED:
        st = _copy_of(a, b)
    if st is None:
        return
    raw = raw_site()
    if raw is None:
        return
    seen = _BY_STATE.setdefault(state, {})
    site = state.site(raw)
    if site not in seen and len(seen) < _SITES:
        seen[site] = created_site(st)[0]


def _node_of(t: Tensor) -> tuple[Any, int]:
    return t.grad_fn, t.output_nr


def _copy_of(b: Tensor, a: Tensor) -> Any:
    """The tagged add when ``b`` is ``a`` plus a detached constant up to shape-only steps that
    cancel out, else None (see the NOTE)."""
    target, nr = _node_of(a)
    node, idx = b.grad_fn, b.output_nr
    n = b.dim()
    perm = list(range(n))
    found = None
    for _ in range(_DEPTH):
        if node is None:
            return None
        if target is None:  # a leaf: its AccumulateGrad
            if type(node).__name__ == "AccumulateGrad" and getattr(node, "variable", None) is a:
                break
        elif node is target and idx == nr:
            break
        name = type(node).__name__
        edges = node.next_functions
        if name == "AddBackward0":
            if not node.metadata.get(META_ST):
                return None
            live = [e for e in edges if e[0] is not None]
            if len(live) != 1 or edges[0][0] is None and getattr(node, "_saved_alpha", 1) != 1:
                return None
            if found is None:
                found = node
            node, idx = live[0]
        elif name == "SubBackward0":
            if edges[0][0] is None or edges[1][0] is not None:
                return None
            node, idx = edges[0]
        elif name == "TransposeBackward0":
            d0, d1 = _dim(node._saved_dim0, n), _dim(node._saved_dim1, n)
            perm = [d1 if p == d0 else d0 if p == d1 else p for p in perm]
            node, idx = edges[0]
        elif name == "PermuteBackward0":
            dims = [_dim(d, n) for d in node._saved_dims]
            perm = [dims[p] for p in perm]
            node, idx = edges[0]
        elif name in _PASS and edges:
            node, idx = edges[idx if idx < len(edges) else 0]
        else:
            return None
    else:
        return None
    return found if found is not None and perm == list(range(n)) else None


def _dim(d: int, n: int) -> int:
    if d >= 1 << 63:
        d -= 1 << 64
    return d + n if d < 0 else d


def zero_diff_findings(state: Any) -> list[Finding]:
    """GT130 at each difference of a value and its straight-through copy (see the NOTE)."""
    seen = _BY_STATE.pop(state, None)
    if not seen or state.backward_count == 0:
        return []
    from gradtrace.runtime.build import code_for, make

    return [make(
        code_for(KIND, "GT130"), site,
        "this difference subtracts a straight-through copy of its other operand (`x + (q - "
        "x).detach()`, the identity for the gradient): its value is `x - q`, but its gradient "
        "with respect to `x` is exactly zero, so nothing computed from it (the next residual, "
        "its losses) trains what made `x`",
        fix="subtract the detached copy (`x - q_st.detach()`) or the code vector itself",
        related=[(st, "the straight-through expression")], severity="warning")
        for site, st in seen.items()]


__all__ = ["KIND", "META_ST", "note_difference", "on_combine", "straight_through_add",
           "tag", "zero_diff_findings"]
