"""Which cuts' values flowed on into a graph that a backward() walked.

# NOTE [cut that reaches the loss]
A parameter without a gradient often has several cuts upstream of it, all of one kind: a
helper that reads ``tensor.data.shape`` for a size and then pads ``tensor.data`` (brevitas'
``pad_to_dim``). Both are ``.data`` of the same tensor; only the second one's value goes on,
through the padding and the rotation, into the next layer and the loss. The first one's value
is read for its shape and dropped: it cut nothing the loss needed.

The fact is recorded while the first backward() calls have not run yet (``watch`` is on from
the first cut of a tensor that requires grad until the third backward() starts): a torch op
whose output has a ``grad_fn`` and that is handed a tensor carrying a recorded cut (the cut's
own value, or one computed from it alone, NOTE [hot path]) marks its node with that cut. The
loss-graph walk of those backward() calls (NOTE [zero-derivative ops]) collects the marked
nodes it meets: their cuts *reached the loss* (``state.reached``).

:func:`gradtrace.runtime.trace.silent.cuts_upstream_of` uses it last, as a tie-break among
cuts that rank alike: a cut that reached the loss comes before one that did not. It never
promotes a cut over a different kind (a logging ``loss.detach()`` meets no graph, so it never
outranks the cut whose value went on to the loss; a cut whose use was not watched keeps its
place in the order the cuts were made). One kind it does drop: a ``.detach()`` of a leaf itself
(NOTE [snapshot cuts]) made while the watch was on, whose value no walked graph met, is the
program's copy of the weights and never the cause (fish-speech: ``before = {n: p.detach()
.clone() ...}`` was named for a speaker encoder whose output only an untaken branch used).
"""
from __future__ import annotations

from typing import Any

import torch

META_CUT_IN = "gradtrace.cut_in"  # -> the Cut whose value this node's op was handed
META_CUT_FLOAT = "gradtrace.cut_float"  # that value was floating point (input_cut.py)
_MARKS = 256  # nodes marked at most, per session

Tensor = torch.Tensor


def note_meet(state: Any, args: tuple[Any, ...], gf: Any) -> None:
    """An op returned ``gf``'s output with grad: mark its node with the first cut it was handed."""
    cuts = state.cuts
    for a in args:
        if isinstance(a, (list, tuple)):
            for b in a[:8]:
                if _mark(state, cuts, b, gf):
                    return
        elif _mark(state, cuts, a, gf):
            return


def _mark(state: Any, cuts: Any, a: Any, gf: Any) -> bool:
    if not isinstance(a, Tensor) or a.requires_grad:
        return False
    hit = cuts.get(id(a))
    if hit is None or hit[0]() is not a:
        return False
    if hit[1] not in state.reached:
        gf.metadata[META_CUT_IN] = hit[1]
        if a.is_floating_point():  # NOTE [derivative through a no_grad copy of its input]
            gf.metadata[META_CUT_FLOAT] = True
        state.met_nodes[id(gf)] = hit[1]
        if len(state.met_nodes) >= _MARKS:  # enough marks: the watch ends (a program that
            state.meet_watch = False         # never calls backward() stops scanning here)
    return True


def seen_in_walk(state: Any, node: Any) -> None:
    """The loss-graph walk met ``node``: a cut it was marked with reached the loss."""
    cut = state.met_nodes.get(id(node))
    if cut is None:
        return
    try:
        if node.metadata.get(META_CUT_IN) is cut:
            state.reached.add(cut)
    except (AttributeError, RuntimeError):
        return


def unused_snapshot(state: Any, cut: Any) -> bool:
    """A ``.detach()`` of a leaf itself (NOTE [snapshot cuts]) made while the watch was on,
    whose value no walked loss graph met: the program's copy of the weights (``before =
    {n: p.detach().clone() ...}``), never why a parameter got no gradient."""
    return cut in state.leaf_cuts and cut in state.watched and cut not in state.reached \
        and state.walks > 0


def watch_after_backward(state: Any) -> None:
    """The watch ends when the walks end (the third backward() walked the last graph)."""
    if state.backward_count >= 3:
        state.meet_watch = False
        state.met_nodes.clear()


__all__ = ["META_CUT_FLOAT", "META_CUT_IN", "note_meet", "seen_in_walk", "unused_snapshot",
           "watch_after_backward"]
