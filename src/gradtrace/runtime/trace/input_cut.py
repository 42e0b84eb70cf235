"""``autograd.grad`` with respect to an input whose output also used values computed from that
input with grad mode off: the derivative leaves those paths out.

# NOTE [derivative through a no_grad copy of its input]
Forces as ``-torch.autograd.grad(energy, pos)`` are only the derivative of the energy when every
path from ``pos`` to ``energy`` is on the graph. A helper run inside ``with torch.no_grad():``
(matgl's CHGNet builds its three-body line graph there: ``lg_bond_vec = bond_vec[edge_ids]``)
hands back values computed from ``pos`` without a graph; the bond angles made from them still
feed the energy, but ``autograd.grad`` treats them as constants, so every three-body
contribution to the forces is missing. Nothing fails: the forces differ from finite
differences of the same energy.

Run-time facts, read when an ``autograd.grad`` call returns, while the tracer still watches
where recorded cuts go (NOTE [cut that reaches the loss]: the first backward calls): an input
of the call is a tensor that requires grad, is not a Parameter and is held by no optimizer (a
position, an image: a weight trained with a stop-gradient target is another matter); the
graph of the call's outputs, walked from their nodes, reaches that input (the derivative is
not empty) and reaches a node marked with a cut made with grad mode off, inside a grad-off
switch of user code, that cut off a value whose upstream leaves hold that very input. The
line named is the switch (the ``with torch.no_grad():`` line); the fix is to compute the
values outside it. A cut that is a comparison or an index (a mask, ``nonzero``: no
derivative either way), a ``.detach()`` (written on purpose), a library's own grad-off code
and ``backward()`` over parameters (a target computed under ``no_grad`` from the same
weights, DQN's stop-gradient) are not reported. GT896.
"""
from __future__ import annotations

from typing import Any

import torch

from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.reached_cuts import META_CUT_FLOAT, META_CUT_IN

KIND = "derivative-skips-no-grad-path"
_NODES = 20000  # graph nodes walked per call
# ops whose value has no derivative anyway (a mask, an index, a count)
_FLAT = frozenset({"le", "lt", "ge", "gt", "eq", "ne", "__le__", "__lt__", "__ge__", "__gt__",
                   "__eq__", "__ne__", "argmax", "argmin", "argsort", "nonzero", "sign",
                   "isfinite", "isnan", "isinf", "round", "floor", "ceil", "trunc", "long",
                   "int", "bool", "logical_and", "logical_or", "logical_not", "where"})


def _inputs(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    v = kwargs.get("inputs", args[1] if len(args) > 1 else None)
    if isinstance(v, torch.Tensor):
        return [v]
    return [t for t in v if isinstance(t, torch.Tensor)][:64] if isinstance(v, (list, tuple)) \
        else []


def _held(state: Any) -> set[int]:
    data = state.hooks_data
    if data is None:
        return set()
    return {id(p) for r in list(data.optimizers.values()) for o in [r.ref()] if o is not None
            for g in o.param_groups for p in g["params"]}


def _walk(roots: Any, state: Any, wanted: dict[int, torch.Tensor]) -> tuple[set[int], list[Any]]:
    """The inputs the graph reaches, and the grad-off cuts met on the way (in walk order)."""
    met, reached, cuts = state.met_nodes, set(), []
    stack = [r.grad_fn for r in roots if isinstance(r, torch.Tensor) and r.grad_fn is not None]
    nonleaf = {id(t.grad_fn): k for k, t in wanted.items() if t.grad_fn is not None}
    seen: set[int] = set()
    while stack and len(seen) < _NODES:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if id(node) in nonleaf:
            reached.add(nonleaf[id(node)])
        var = getattr(node, "variable", None)
        if var is not None and id(var) in wanted:
            reached.add(id(var))
        cut = met.get(id(node))
        if cut is not None and cut not in cuts and _float_in(node, cut):
            cuts.append(cut)
        stack.extend(n for n, _ in node.next_functions if n is not None)
    return reached, cuts


def _float_in(node: Any, cut: Any) -> bool:
    """The node's op was handed the cut's value as a floating-point tensor (an index or a
    mask built from it carries no derivative either way)."""
    try:
        meta = node.metadata
        return meta.get(META_CUT_IN) is cut and bool(meta.get(META_CUT_FLOAT))
    except (AttributeError, RuntimeError):
        return False


def cut_paths(state: Any, args: tuple[Any, ...], kwargs: dict[str, Any], roots: Any) -> None:
    """From an ``autograd.grad`` call that returned (see the NOTE)."""
    if not state.met_nodes or not state.meet_watch:
        return
    wanted = {id(t): t for t in _inputs(args, kwargs)
              if t.requires_grad and not isinstance(t, torch.nn.Parameter)}
    if not wanted:
        return
    cands = [c for c, ups in state.cut_upstream.items()
             if c.reason == "no_grad" and not c.library and c.grad_off is not None
             and c.op not in _FLAT and ups & wanted.keys()]
    if not cands:
        return
    held = _held(state)
    wanted = {k: t for k, t in wanted.items() if k not in held}
    reached, cuts = _walk(roots or (), state, wanted)
    if not reached:
        return
    for cut in cuts:
        if cut in cands and state.cut_upstream.get(cut, frozenset()) & reached:
            off: Site = cut.switch or cut.grad_off
            state.note(KIND, off, cut.op, "", ((cut.site, f"`{cut.op}` ran here with grad "
                                                "mode off on a value computed from the input"),))
            return


__all__ = ["KIND", "cut_paths"]
