"""A new loss built after an optimizer step from a value whose graph the step's backward() freed
(issue 13, graph_lifetime).

# NOTE [second loss on a stepped graph]
``logits = model(x); loss.backward(); opt.step(); ...; loss2 = f(logits); loss2.backward()``
raises "backward through the graph a second time". The GAN rule (``freed_earlier``: the first
consumer should have used ``.detach()``) fits when the optimizer that stepped in between holds
none of the parameters the freed graph runs through (D stepped; the freed graph is G's). When it
holds them (Sophia's Hessian estimate from ``logits`` after ``optimizer.step()``), the first
backward() needed that graph and the step has since changed its parameters: the value is stale,
and the cause is the line that built the second loss from it, after the backward() that freed
it (a node of the failing graph created later than that backward(), consuming the freed node).
The fix is a fresh forward pass there. Not when the freed node is the root of the freeing
backward() (no consumer stamped, META_FREED_VIA): that is the loss itself backpropagated again
(two hooks each calling backward() on one loss, mmcv#1379), not a stale value. Read only when
such a crash is diagnosed.
"""
from __future__ import annotations

from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make, src
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.graph_walk import freed_user
from gradtrace.runtime.trace.records import META_FREED_VIA


def _leaves_under(node: Any, limit: int = 4000) -> set[int]:
    out: set[int] = set()
    todo, seen = [node], set()
    while todo and len(seen) < limit:
        n = todo.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        var = getattr(n, "variable", None)
        if var is not None:
            out.add(id(var))
        try:
            todo.extend(m for m, _ in n.next_functions)
        except (AttributeError, RuntimeError):
            continue
    return out


def _late_consumer(roots: list[Any], since: int, limit: int = 5000) -> Site | None:
    """The line of the node that consumes a freed node in the failing graph, if that node was
    created after the backward() numbered ``since`` (its sequence) freed it."""
    user, _ = freed_user(roots, limit)
    return user[0] if user is not None and user[1] > since else None


def stale_after_step(roots: list[Any], node: Any, freed_seq: int, state: Any, pat: Any,
                     made: Site | None, freed_by: Site | None,
                     site: Site | None) -> Finding | None:
    """The finding of NOTE [second loss on a stepped graph], else None."""
    data, last = getattr(state, "hooks_data", None), getattr(state, "after_step", None)
    try:  # the loss itself backpropagated again (no consumer in the freeing graph): not this
        interior = META_FREED_VIA in node.metadata
    except (AttributeError, RuntimeError):
        interior = False
    if data is None or last is None or freed_seq is None or not interior:
        return None
    opts = [r.ref() for r in list(data.optimizers.values()) if r.site == last]
    held = {id(p) for o in opts if o is not None for g in o.param_groups for p in g["params"]}
    if not held or not held & _leaves_under(node):
        return None
    used = _late_consumer(roots, freed_seq)
    if used is None or used == freed_by:
        return None
    return make(code_for("backward-through-freed-graph", pat.code), used,
                f"this line builds a new loss from the value computed at {src(made)}, after "
                f"the backward() at {src(freed_by)} freed its graph and the optimizer step at "
                f"line {last.line} changed the parameters it was computed from: the value is "
                "stale and its graph is gone", fix="compute the value again with a fresh "
                "forward pass here (or, to reuse the old one, retain_graph=True on the first "
                "backward())", related=[(made, "the value was computed here"),
                                        (freed_by, "this backward() freed its graph"),
                                        (last, "this step changed the parameters"),
                                        (site, "this backward() needs the graph again")])


__all__ = ["stale_after_step"]
