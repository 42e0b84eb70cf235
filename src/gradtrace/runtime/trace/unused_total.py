"""A running total of graph tensors that no backward() ever runs through.

# NOTE [total never backpropagated]
``val_loss += loss`` in a validation loop that runs without ``torch.no_grad()`` (ImVisible's
``validate``) keeps, in the total, the whole autograd graph of every batch summed into it: the
activations each forward saved for a backward that never comes. Memory grows with every batch,
and nothing fails. The training loop's own total (``running_loss += loss`` after each
``loss.backward()``, GT505) keeps only node skeletons: its terms' saved tensors were freed by
their backward. The validation total is the worse of the two, and the one to fix first.

Run-time facts (no per-op work beyond the in-place adds already recorded by
``TraceState.on_inplace``): an in-place add (``+=``/``add_``), grad on, into a tensor whose
node was made on the same line (a running total), of a term with a graph, outside any module's
forward. The first such add of a chain (the total's node was not made by the previous add)
starts a record at that line, remembers the session's backward() count and puts one pre-hook on
the total's node then: any backward() through the total, now or later, runs that node (every
later sum reaches it). Each next add of the same chain counts. A chain is *unused* when it
counted at least ``_MIN`` adds with no backward() between them and its first node never ran.
Reported at the end, only in a session that ran a backward() (a program that trains): an
unrolled sum that is then backpropagated (an RNN's ``loss += step_loss``, micro-batches summed
before one backward()) runs the node; a training total spans backward() calls (GT505's case).
One finding per line; the hook is removed when the chain is settled or at the end.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.records import created_site

CODE = "GT868"
_MIN = 8  # adds with no backward() between them
_SITES = 16  # lines watched
_ADDS = frozenset({"add_", "__iadd__"})
_CALLS = frozenset({"_call_impl", "_wrapped_call_impl"})


@dataclass
class Total:
    backwards: int  # the session's backward() count at the chain's first add
    last: int  # id of the node the last add made (the chain goes on from it)
    term: Site | None  # where the first term was made
    count: int = 1
    ran: bool = False
    unused: bool = False  # a settled chain no backward() ran through
    handle: Any = None

    def mark(self, *_: Any) -> None:
        self.ran = True


def note_total(state: Any, raw: Any, op: str, gf: Any, after: Any) -> None:
    """From ``TraceState.on_inplace``: one in-place add with grad on (see the NOTE)."""
    if gf is None or after is None or raw is None or op not in _ADDS:
        return
    site = state.site(raw)
    totals = state.totals
    rec = totals.get(site) if totals is not None else None
    if rec is not None and rec.unused:
        return
    if rec is not None and id(gf) == rec.last and rec.backwards == state.backward_count:
        rec.count += 1
        rec.last = id(after)
        return
    if created_site(gf)[0] != site:
        return
    terms = [f for f, _ in after.next_functions if f is not None and f is not gf]
    if not terms or _in_forward():
        return
    if rec is not None:  # a new chain at this line: settle the old one
        _unhook(rec)
        if rec.count >= _MIN and not rec.ran:
            rec.unused = True
            return
    elif totals is None:
        totals = state.totals = {}
    elif len(totals) >= _SITES:
        return
    new = totals[site] = Total(state.backward_count, id(after), created_site(terms[0])[0])
    try:
        new.handle = gf.register_prehook(new.mark)
    except RuntimeError:  # a node that takes no hooks: nothing to watch
        del totals[site]


def _in_forward() -> bool:
    """The add runs inside a module's call (a sum in a forward, not a loop's total)."""
    f = sys._getframe(2)
    while f is not None:
        if f.f_code.co_name in _CALLS:
            return True
        f = f.f_back
    return False


def _unhook(rec: Total) -> None:
    if rec.handle is not None:
        rec.handle.remove()
        rec.handle = None


def unused_total_findings(state: Any) -> list[Finding]:
    """GT868 at each running total no backward() ran through (see the NOTE)."""
    totals = state.totals
    if not totals:
        return []
    for rec in totals.values():
        _unhook(rec)
    if state.backward_count == 0:
        return []
    from gradtrace.runtime.build import make

    out = []
    for site, rec in totals.items():
        if rec.unused or rec.count >= _MIN and not rec.ran:
            related = [(rec.term, "each term is made here, with the graph of its forward pass")]
            out.append(make(
                CODE, site,
                f"this running total adds up at least {rec.count} tensors with their autograd "
                "graph and no backward() ever runs through it: every term's forward graph, "
                "with the activations it saved for a backward that never comes, stays alive in "
                "the total, so memory grows with every pass (the static check's GT505 names a "
                "running total kept across backward() calls)",
                fix="add `.item()` (a float) or `.detach()` to the total, or run this loop "
                    "under `torch.no_grad()`",
                related=related, severity="warning"))
    return out


__all__ = ["CODE", "note_total", "unused_total_findings"]
