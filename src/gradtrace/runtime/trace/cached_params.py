"""A second backward() through a parametrized weight cached across steps.

# NOTE [parametrization cached across backwards]
Inside ``with torch.nn.utils.parametrize.cached():`` a parametrized tensor (``weight`` of a
module given ``register_parametrization``) is computed once and reused until the block ends.
A training loop put inside that block (the Siamese example of issue 13's held-out cases) reuses
the first step's weight, whose graph the first ``backward()`` frees: the second one fails
("Trying to backward through the graph a second time"). The run names the line the error
points at otherwise (the parametrization's ``forward``), while the cause is the block.

When that error is diagnosed and a cache is open (``parametrize._cache_enabled``), the freed
node is looked for in the graphs of the tensors held in parametrize's cache (a bounded walk
from each one's ``grad_fn``). When one holds it, the finding names the ``with`` statement of
the user's frames (innermost first) whose context expression calls ``cached``, read in the
file's syntax tree. Nothing else changes: a cache opened around one forward and backward, or
the error raised by another graph, keeps its diagnosis.
"""
from __future__ import annotations

import ast
import sys
from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make
from gradtrace.runtime.frames import Site, is_internal

_WALK = 2000  # nodes visited per cached tensor at most


def cached_block(node: Any, site: Site | None, made: Site | None, pat: Any) -> Finding | None:
    """GT507's family at the ``with ...cached():`` line when the freed ``node`` is in the graph
    of a parametrized tensor the open cache holds."""
    from torch.nn.utils import parametrize

    if not getattr(parametrize, "_cache_enabled", 0) or not _in_cache(node, parametrize._cache):
        return None
    where = _with_line()
    if where is None:
        return None
    return make(code_for("graph-reused-across-steps", pat.code), where,
                "this `parametrize.cached()` block spans several backward() calls: the "
                "parametrized weight is computed once, at the first forward inside it, and "
                "reused by every later step, but the first backward() freed its graph",
                fix="open the cache around one forward and backward (inside the loop), or not "
                    "at all while training",
                related=[(made, "the cached weight was computed here"),
                         (site, "this backward() needs its graph again")])


def _in_cache(node: Any, cache: dict[Any, Any]) -> bool:
    for t in list(cache.values()):
        queue, seen = [getattr(t, "grad_fn", None)], set()
        while queue and len(seen) < _WALK:
            n = queue.pop()
            if n is None or id(n) in seen:
                continue
            if n is node:
                return True
            seen.add(id(n))
            try:
                queue.extend(m for m, _ in n.next_functions if m is not None)
            except (AttributeError, RuntimeError):
                continue
    return False


def _with_line() -> Site | None:
    from gradtrace.runtime.trace.locate import tree_of

    f = sys._getframe(1)
    while f is not None:
        code = f.f_code
        if not is_internal(code):
            tree = tree_of(code.co_filename)
            line = f.f_lineno
            best = None
            for n in ast.walk(tree) if tree is not None else ():
                if isinstance(n, ast.With) and n.lineno <= line <= (n.end_lineno or n.lineno) \
                        and any(_calls_cached(i.context_expr) for i in n.items):
                    if best is None or n.lineno > best.lineno:
                        best = n
            if best is not None:
                return Site(code.co_filename, best.lineno, code.co_name)
        f = f.f_back
    return None


def _calls_cached(expr: ast.expr) -> bool:
    if not isinstance(expr, ast.Call):
        return False
    fn = expr.func
    return isinstance(fn, ast.Attribute) and fn.attr == "cached" or \
        isinstance(fn, ast.Name) and fn.id == "cached"
