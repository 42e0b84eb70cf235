"""A tensor that had no graph gets one written into it in place.

# NOTE [graph written into a plain tensor]
A buffer made without a graph (``self.actions = torch.zeros(n, d)``, a state kept across
steps) that is later filled in place from a value that requires grad (``self.actions[:] =
policy(obs)``, ``buf.copy_(net(x))``) requires grad from then on: every value computed from it
carries the graph, and the first numpy conversion downstream (an array bridge, a logger, a
simulator reading the targets) fails far from the write. The write is the decision to change
(detach the value written, or write under ``torch.no_grad()``): in the converted tensor's graph
it is a ``CopySlices``/``CopyBackwards`` node whose edge to the written tensor's previous value
is empty (autograd's record that the destination had no graph before), and the tracer recorded
the user line that made that node. The nearest such node wins; the write must be another line
than the conversion. ``None`` otherwise (the other readings run).
"""
from __future__ import annotations

from typing import Any

from gradtrace.runtime.frames import Site, raw_site
from gradtrace.runtime.trace.records import META_CREATED, created_site

_WRITES = ("CopySlices", "CopyBackwards")


def stamp_write(target: Any, seq: int) -> None:
    """Called by the tracer after an in-place op that gave ``target`` (no graph before) one:
    a copy node is stamped with the user line of the write (the hot path leaves in-place
    outputs unstamped)."""
    gf = target.grad_fn
    if gf is not None and type(gf).__name__ in _WRITES and META_CREATED not in gf.metadata:
        raw = raw_site()
        if raw is not None:
            gf.metadata[META_CREATED] = (raw[0], raw[1], seq)


def plain_tensor_written(t: Any, site: Site | None, limit: int = 256) -> Site | None:
    """NOTE [graph written into a plain tensor]: the line of the in-place write, or None."""
    if t is None or site is None or getattr(t, "grad_fn", None) is None:
        return None
    queue, seen = [t.grad_fn], set()
    while queue and len(seen) < limit:
        node = queue.pop(0)
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        try:
            edges = node.next_functions
        except (AttributeError, RuntimeError):
            continue
        if type(node).__name__ in _WRITES and edges and edges[0][0] is None:
            made = created_site(node)[0]
            if made is not None and made.line != site.line or made is not None \
                    and made.path != site.path:
                return made
        queue.extend(n for n, _ in edges if n is not None)
    return None
