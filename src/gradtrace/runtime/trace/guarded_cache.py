"""# NOTE [cache filled under a guard]
A second backward() needs a graph the first one freed, and the freed node was made under a cache
check: an ``if`` whose test reads an attribute of ``self`` and whose body refreshes attributes of
``self`` (``if not torch.allclose(cell, self._cell_cache): self._cell_cache = ...;
self._KF.update_mesh(cell, ...)``). The first call built the cached values from inputs that carry
a graph; the next call finds the check satisfied, skips the block and reuses them, and its
backward() runs into the graph the first backward() freed. The check is the line to change (it
must also rebuild when the inputs carry a new graph, or the values it caches must not keep one).

Named when the freed node's line sits in such an ``if``, or in a function whose every call in
that file sits in one such ``if``, and the failing graph holds no node made at that line since
the last backward() (a value rebuilt every pass is state carried over, not a cache).
"""
from __future__ import annotations

import ast
from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make, src
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.locate import cache_guard, tree_of
from gradtrace.runtime.trace.records import created_site


def _guard_of(made: Site) -> Site | None:
    """The cache check around ``made``, or around every call in its file of the function that
    holds ``made``."""
    own = cache_guard(made)
    if own is not None:
        return own
    tree = tree_of(made.path)
    name = made.function
    if tree is None or not name or name.startswith("<") or name.startswith("__"):
        return None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and (
        (isinstance(n.func, ast.Attribute) and n.func.attr == name)
        or (isinstance(n.func, ast.Name) and n.func.id == name))]
    guards = {cache_guard(Site(made.path, c.lineno, "")) for c in calls}
    if len(calls) == 0 or len(guards) != 1 or None in guards:
        return None
    return guards.pop()


def rebuilt(roots: list[Any], made: Site, since: int, limit: int = 5000) -> bool:
    """Does the failing graph hold a node made at ``made`` since the backward() of ``since``?"""
    from gradtrace.runtime.trace.graph_walk import graph_nodes

    return any(created_site(n)[0] == made and created_site(n)[1] > since
               for n in graph_nodes(roots, limit))


def guarded_cache(roots: list[Any], made: Site | None, site: Site, pat: Any,
                  state: Any) -> Finding | None:
    """NOTE [cache filled under a guard]: the cache check, when ``made`` was filled under one."""
    guard = _guard_of(made) if made is not None else None
    if guard is None or rebuilt(roots, made, state.last_backward_seq):
        return None
    return make(code_for("graph-reused-across-steps", pat.code), guard,
                f"this check skips rebuilding values cached on the object (one made at "
                f"{src(made)}) when it finds the cache valid; the first call built them with "
                "a graph, the first backward() freed it, and this backward() reuses them",
                fix="rebuild the cached values when the inputs carry a new graph (or cache "
                    "them detached if they need no gradient)",
                related=[(made, "the cached value was made here, with its graph"),
                         (site, "this backward() needs the freed graph")])
