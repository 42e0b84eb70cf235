"""The first optimizer step that broke a graph a later backward() needed.

# NOTE [first step that broke the graph]
Several optimizers can step between a graph's forward and its backward (SAC's two Q networks
stepped, each after its own backward, before the policy loss built through both is
backpropagated). backward() fails on the saved parameter the engine meets first, the newest
node's (the second Q network's), so the run named the *last* step before the failing
backward. The statement to move is the *first* step that changed a parameter the graph saved:
the failing backward (or the loss it comes from) has to come before it.

The last 8 steps are kept (the tracer's sequence number when each ended, its line, the
optimizer weakly). When the diagnosis falls back to the step line, the failing graph is walked
(5000 nodes at most): the nodes whose saved tensors fail to unpack with the version error, and
the leaves within 3 edges of each (the parameters those nodes saved, or their views). Among
the steps that ended after the oldest such node was made, the earliest whose optimizer holds
one of those leaves is named; none found: the last step, as before.
"""
from __future__ import annotations

import weakref
from typing import Any

from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.records import created_site

KEEP = 8


def note_step(state: Any, seq: int, site: Site | None, opt: Any) -> None:
    """From the step post-hook: remember this step (its end's sequence number)."""
    steps = state.recent_steps
    steps.append((seq, site, weakref.ref(opt)))
    if len(steps) > KEEP:
        del steps[0]


def _failing(roots: list[Any], limit: int = 5000) -> list[Any]:
    queue = [r.grad_fn for r in roots if getattr(r, "grad_fn", None) is not None]
    seen: set[int] = set()
    failed = []
    while queue and len(seen) < limit:
        node = queue.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        for attr in dir(node):
            if attr.startswith("_saved_"):
                try:
                    getattr(node, attr)
                except RuntimeError as e:
                    if "modified by an inplace operation" in str(e):
                        failed.append(node)
                        break
                except Exception:  # noqa: BLE001 - any other failure: not this attribute
                    continue
        try:
            queue.extend(n for n, _ in node.next_functions if n is not None)
        except (AttributeError, RuntimeError):
            continue
    return failed


def _leaves(node: Any, depth: int = 3) -> set[int]:
    out: set[int] = set()
    level = [node]
    for _ in range(depth):
        nxt = []
        for n in level:
            try:
                edges = n.next_functions
            except (AttributeError, RuntimeError):
                continue
            for m, _ in edges:
                if m is None:
                    continue
                var = getattr(m, "variable", None)
                if var is not None:
                    out.add(id(var))
                else:
                    nxt.append(m)
        level = nxt
    return out


def first_breaking_step(state: Any, roots: list[Any]) -> Site | None:
    """The earliest recent step that changed a parameter the failing graph saved (the NOTE),
    when it is not the last step; else None."""
    steps = [s for s in state.recent_steps if s[1] is not None]
    if len(steps) < 2:
        return None
    failed = _failing(roots)
    if not failed:
        return None
    made = [created_site(n)[1] for n in failed]
    if min(made) < 0:
        return None  # a node made while unarmed: which steps came after it is unknown
    since = min(made)
    params: set[int] = set()
    for n in failed:
        params |= _leaves(n)
    for seq, site, ref in steps:
        opt = ref()
        if seq <= since or opt is None:
            continue
        held = any(id(p) in params for g in opt.param_groups for p in g["params"])
        if held:
            return site if site != steps[-1][1] else None
    return None
