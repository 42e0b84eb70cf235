"""Losses kept alive after their backward(): every step's graph stays referenced.

# NOTE [losses kept alive]
``loss_history.append(loss)`` after ``loss.backward()`` keeps the loss tensor, and with it its
``grad_fn`` and the whole node chain of that step (tntorch's fitting loop): memory grows with
every step, and the history is not a list of numbers. The tracer keeps weak references to the
losses of the first 8 backward() calls (one root each). At the end, when at least 4 backward()
calls ran and at least 4 of those losses are still alive with their ``grad_fn``, something keeps
them. The line named is the statement, in the function of that backward() call (its own scope),
that stores the backpropagated name into a container: ``X.append(loss)``, ``X.extend([loss])``,
``X.insert(i, loss)``, ``X[k] = loss``, ``X += [loss]``. Without such a statement nothing is
reported (a loss kept by an object the run cannot read is left alone). A loop that keeps only
the last loss (``loss`` itself, ``self.last_loss``) keeps one, not four.

Nor is an unrolled computation (learning to learn, ``x = x + update`` carried across steps):
the last loss's graph reaches a non-leaf node of an earlier loss's graph, so the steps are one
graph that the carried tensor keeps anyway, and the kept losses are its objective. Separate
training steps share only their leaves (``AccumulateGrad``). The same holds for a running total
(``total += loss``, :func:`adds_chained`); the static GT505 reads it from the code
(``rules/training_loop/_unroll.py``).
"""
from __future__ import annotations

import ast
from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.frames import Site


def kept_loss_findings(state: Any) -> list[Finding]:
    """GT505 at the statement that keeps the backpropagated losses (see the NOTE)."""
    if state.backward_count < 4 or len(state.kept_roots) < 4:
        return []
    kept = [(t, site) for ref, site in state.kept_roots
            if (t := ref()) is not None and t.grad_fn is not None]
    if len(kept) < 4 or _chained([t.grad_fn for t, _ in kept]):
        return []
    alive = [site for _, site in kept]
    del kept
    site = alive[0]
    found = _store(site)
    if found is None:
        return []
    from gradtrace.runtime.build import code_for, make, src

    at, name = found
    return [make(code_for("graph-kept", "GT826"), at,
                 f"`{name}` is stored here after its backward() ({src(site)}): "
                 f"{len(alive)} of the first {len(state.kept_roots)} losses backpropagated are "
                 "still alive with their autograd graph at the end, so every step's graph "
                 "stays referenced (memory grows with each step)",
                 fix=f"store `{name}.item()` (a float) or `{name}.detach()`",
                 related=[(site, "each loss is backpropagated here")], severity="warning")]


def _nodes(fn: Any, cap: int = 5000) -> dict[int, Any]:
    """The non-leaf nodes of ``fn``'s graph (held while the caller compares them, so that no
    id is reused), at most ``cap``."""
    seen: dict[int, Any] = {}
    stack = [fn]
    while stack and len(seen) < cap:
        n = stack.pop()
        if n is None or id(n) in seen or type(n).__name__ == "AccumulateGrad":
            continue
        seen[id(n)] = n
        stack.extend(f for f, _ in n.next_functions)
    return seen


def _chained(roots: list[Any]) -> bool:
    """The last root's graph shares a non-leaf node with an earlier root's (see the NOTE)."""
    earlier: dict[int, Any] = {}
    for fn in roots[:-1]:
        earlier.update(_nodes(fn))
    return not earlier.keys().isdisjoint(_nodes(roots[-1]))


def adds_chained(total: Any, after: Any) -> bool:
    """``total += term`` (``after`` the sum's node, ``total`` the old total's): the term's
    graph shares a non-leaf node with the old total's: an unrolled computation."""
    if after is None:
        return False
    terms = [f for f, _ in after.next_functions if f is not None and f is not total]
    return len(terms) == 1 and _chained([total, terms[0]])


def _store(site: Site) -> tuple[Site, str] | None:
    from gradtrace.runtime.trace.locate import tree_of
    from gradtrace.runtime.trace.offstack import _own

    tree = tree_of(site.path)
    if tree is None:
        return None
    scope: ast.AST = tree
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and n.lineno <= site.line <= (n.end_lineno or n.lineno) \
                and (scope is tree or n.lineno > scope.lineno):  # type: ignore[attr-defined]
            scope = n
    own = _own(scope)
    name = next((n.func.value.id for n in own if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Attribute) and n.func.attr == "backward"
                 and n.lineno == site.line and isinstance(n.func.value, ast.Name)), None)
    if name is None:
        return None
    for n in sorted(own, key=lambda x: getattr(x, "lineno", 0)):
        if _stores(n, name):
            return Site(site.path, n.lineno, site.function, n.col_offset), name  # type: ignore
    return None


def _is(e: ast.AST, name: str) -> bool:
    return isinstance(e, ast.Name) and e.id == name


def _stores(n: ast.AST, name: str) -> bool:
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
        a = n.args
        if n.func.attr == "append" and len(a) == 1 and _is(a[0], name):
            return True
        if n.func.attr == "insert" and len(a) == 2 and _is(a[1], name):
            return True
        if n.func.attr == "extend" and len(a) == 1 and isinstance(a[0], (ast.List, ast.Tuple)) \
                and any(_is(e, name) for e in a[0].elts):
            return True
    if isinstance(n, ast.Assign) and _is(n.value, name) \
            and any(isinstance(t, ast.Subscript) for t in n.targets):
        return True
    return isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Add) \
        and isinstance(n.value, (ast.List, ast.Tuple)) and any(_is(e, name) for e in n.value.elts)


__all__ = ["adds_chained", "kept_loss_findings"]
