"""A loss term cut off from the trained model by ``.detach()``: only a module no optimizer holds
gets its gradient.

# NOTE [term detached from the model it should train]
joliGEN's ``backward_G`` sums a semantic loss into the generator's loss, but computes it on
``self.netf_s(self.fake_B.detach())``: the detach stops the term at the generator's output, so
its gradient reaches only the segmentation net, which no optimizer of that step holds. GT821
("receive gradients but no optimizer updates them") is true of the segmentation net, but the
line that made the term useless is the detach: the generator was meant to learn from it.

Run-time facts, from the loss-graph walks of the first backward() calls
(NOTE [cut that reaches the loss]): a node marked with a ``.detach()`` cut of user code (an op
handed the detached value) is met by a walk; the leaves that node feeds directly (its own
weights, up to two nodes down) are recorded with the leaves the whole walk reached. When GT821
is made for a module's parameters and they are among the leaves a reached detach cut fed, and
that same walk (the same backward) also reached a parameter an optimizer holds that lies
upstream of the detach (the detached value was computed from the trained model, and the term is
summed into its loss), the line named is the detach. A discriminator step on ``fake.detach()``
(its own backward, reaching no optimized parameter behind the detach) keeps GT821's own line.
"""
from __future__ import annotations

from typing import Any

DETACHED = "the value they are applied to is detached here"
_CUTS = 32  # detach cuts followed
_DEPTH = 2  # nodes down from the marked node to its own weights
_MODULES = 4096  # modules searched for the network holding them


def _own_leaves(node: Any) -> set[int]:
    out: set[int] = set()
    todo = [(node, 0)]
    while todo:
        n, d = todo.pop()
        var = getattr(n, "variable", None)
        if var is not None:
            out.add(id(var))
            continue
        if d >= _DEPTH:
            continue
        try:
            todo.extend((m, d + 1) for m, _ in n.next_functions if m is not None)
        except (AttributeError, RuntimeError):
            continue
    return out


def note_walk(state: Any, hits: list[Any], leaves: set[int]) -> None:
    """After a loss-graph walk: ``hits`` the marked nodes it met, ``leaves`` every leaf id."""
    feeds = state.cut_feeds
    for node in hits:
        cut = state.met_nodes.get(id(node))
        if cut is None or cut.reason != "detach" or cut.library:
            continue
        if cut not in feeds and len(feeds) >= _CUTS:
            continue
        own, walked = feeds.setdefault(cut, (set(), set()))
        own |= _own_leaves(node)
        walked |= leaves


def _term_params(data: Any, own: set[int], in_opt: set[int]) -> set[int]:
    """``own`` widened to the largest module that ran, holds one of them and holds no
    optimized parameter (the whole auxiliary network the detached value went into)."""
    best = set(own)
    if data is None:
        return best
    for i, rec in enumerate(list(data.modules.values())):
        m = rec.ref()
        if m is None or i > _MODULES:
            continue
        ps = {id(p) for p in m.parameters()}
        if len(ps) > len(best) and ps & own and not ps & in_opt:
            best = ps
    return best


def detached_feed(state: Any, missed: list[Any], in_opt: set[int]) -> Any:
    """(site, why, fix) naming the detach whose term fed ``missed`` (parameters in no
    optimizer) while the same backward reached optimized parameters behind that detach; else
    None."""
    ids = {id(p) for p in missed}
    for cut, (own, walked) in list(state.cut_feeds.items()):
        behind = state.cut_upstream.get(cut, frozenset())
        if behind & walked & in_opt and ids & _term_params(state.hooks_data, own, in_opt):
            return (cut.site, DETACHED + " from the model "
                    "the optimizer trains, while their loss term is summed into that model's "
                    "loss: the term's gradient stops at the detach and reaches only them, and "
                    "they are in no optimizer, so the term trains nothing",
                    "drop the `.detach()` if the term should train the model behind it (or "
                    "give these parameters an optimizer if they are the ones to train)")
    return None


__all__ = ["DETACHED", "detached_feed", "note_walk"]
