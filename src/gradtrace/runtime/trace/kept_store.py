"""Where a training value converted to numpy was kept with its graph.

# NOTE [numpy of a kept training value]
``np.log10(losses)`` / ``plt.plot(history)`` fails on a tensor that requires grad. When the
graph of that tensor reaches a node a backward() already ran through (META_FREED or
META_RETAINED, stamped by :func:`graph_walk.stamp_freed`), the tensor is a value of a training
step kept past its step: the loss itself (``losses.append(loss)`` after ``loss.backward()``),
or a term of it (``parts.append(fit)`` where ``(fit + reg).backward()``), or an average of
such terms. The line to change is the statement that keeps it, in the function of that
backward() call (its own scope), not the plot that converts it. It is found from run-time
facts only:

1. the name backpropagated at that backward() line, stored into a container in its scope
   (``X.append(loss)``, ``X[k] = loss``, ``X.extend([loss])``, ``X += [loss]``); else
2. the containers (lists, tuples, dict values, one level) reachable from the live user frames
   at the failure (locals and globals) that hold a tensor whose ``grad_fn`` is one of those
   backpropagated nodes: the statement of that scope that fills the container of that name.

A tensor never backpropagated (evaluation outputs kept with grad on) has no such node: the
other readings of :func:`diagnose_kept.kept_numpy_finding` apply.
"""
from __future__ import annotations

import ast
import sys
from typing import Any

from gradtrace.runtime.frames import Site, is_internal
from gradtrace.runtime.trace.records import META_FREED, META_RETAINED, decode_meta

_FILL = ("append", "extend", "insert")


def _freed_nodes(t: Any, limit: int = 512) -> tuple[Site | None, dict[int, Any]]:
    """The backward() that first ran through the graph of ``t`` (nearest node first), and the
    nodes of that graph a backward ran through, by id (the walk stops at them; the caller
    holds them while it compares ids)."""
    queue, seen, freed, bwd = [t.grad_fn], set(), {}, None
    keep = []  # the nodes walked stay alive during the walk, so that ids stay unique
    while queue and len(seen) < limit:
        node = queue.pop(0)
        if node is None or id(node) in seen or type(node).__name__ == "AccumulateGrad":
            continue
        seen.add(id(node))
        keep.append(node)
        try:
            meta = node.metadata
            stamp = meta.get(META_FREED) or meta.get(META_RETAINED)
            if stamp is not None:
                freed[id(node)] = node
                if bwd is None:
                    bwd = decode_meta(stamp)[0]
                continue
            queue.extend(n for n, _ in node.next_functions if n is not None)
        except (AttributeError, RuntimeError):
            continue
    return bwd, freed


def _scope(site: Site) -> list[ast.AST] | None:
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
    return _own(scope)


def _holders(freed: dict[int, Any], frames: list[Any] | None) -> set[str]:
    """Names (variables, attributes) of the live user frames' containers that hold a tensor
    whose ``grad_fn`` is one of ``freed`` (NOTE [numpy of a kept training value], 2)."""
    import torch

    def holds(v: Any) -> bool:
        items = v.values() if isinstance(v, dict) else v
        try:
            return any(isinstance(e, torch.Tensor) and id(e.grad_fn) in freed
                       for e in list(items)[:4096])
        except Exception:
            return False

    names: set[str] = set()
    spaces: dict[int, dict] = {}
    if frames is None:
        frames, f = [], sys._getframe(1)
        while f is not None:
            frames.append(f)
            f = f.f_back
    for f in frames:
        if not is_internal(f.f_code):
            spaces.setdefault(id(f.f_locals), f.f_locals)
            spaces.setdefault(id(f.f_globals), f.f_globals)
            obj = f.f_locals.get("self")
            if obj is not None and isinstance(getattr(obj, "__dict__", None), dict):
                spaces.setdefault(id(obj.__dict__), obj.__dict__)
    for space in spaces.values():
        for k, v in list(space.items()):
            if isinstance(v, (list, tuple, dict)) and not k.startswith("__") and holds(v):
                names.add(k)
    return names


def _tail(e: ast.AST) -> str | None:
    while isinstance(e, ast.Subscript):
        e = e.value
    return e.id if isinstance(e, ast.Name) else e.attr if isinstance(e, ast.Attribute) else None


def _fills(n: ast.AST, names: set[str]) -> bool:
    """``n`` puts a value into a container named in ``names``."""
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _FILL:
        return _tail(n.func.value) in names
    if isinstance(n, ast.Assign):
        return any(isinstance(t, ast.Subscript) and _tail(t) in names for t in n.targets)
    return isinstance(n, ast.AugAssign) and isinstance(n.value, (ast.List, ast.Tuple)) \
        and _tail(n.target) in names


def kept_store(t: Any, frames: list[Any] | None = None) -> tuple[Site, Site] | None:
    """(the statement keeping ``t``'s training value, the backward() that ran through it):
    NOTE [numpy of a kept training value]. ``frames``: the live frames to read (a traceback's,
    after the fact), else the caller's stack."""
    from gradtrace.runtime.trace.kept_losses import _stores

    if getattr(t, "grad_fn", None) is None:
        return None
    bwd, freed = _freed_nodes(t)
    own = _scope(bwd) if bwd is not None else None
    if not own:
        return None
    name = next((n.func.value.id for n in own if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Attribute) and n.func.attr == "backward"
                 and n.lineno == bwd.line and isinstance(n.func.value, ast.Name)), None)
    ordered = sorted((n for n in own if hasattr(n, "lineno")), key=lambda x: x.lineno)
    hit = next((n for n in ordered if name is not None and _stores(n, name)), None)
    where = None
    if hit is None:
        holders = _holders(freed, frames)
        hit = next((n for n in ordered if holders and _fills(n, holders)), None)
        if hit is None and holders:
            where = _filled_in_callee(ordered, holders, bwd.path)
    del freed
    if where is not None:
        return where, bwd
    if hit is None:
        return None
    return Site(bwd.path, hit.lineno, bwd.function, hit.col_offset), bwd  # type: ignore


def _filled_in_callee(ordered: list[ast.AST], holders: set[str], path: str) -> Site | None:
    """NOTE [numpy of a kept training value], 3: the statement filling a holder inside a
    function of the file that the backward's scope calls (``meter.update(pred)`` whose body
    appends to ``self.scores``; ``record(history, v)`` whose parameter ``hist`` is
    ``history``): the helper keeps the value."""
    from gradtrace.runtime.trace.locate import tree_of
    from gradtrace.runtime.trace.offstack import _own

    tree = tree_of(path)
    if tree is None:
        return None
    defs: dict[str, list[ast.FunctionDef]] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef):
            defs.setdefault(n.name, []).append(n)
    for call in ordered:
        if not isinstance(call, ast.Call):
            continue
        f = call.func
        callee = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) \
            else None
        found = defs.get(callee or "", [])
        if len(found) != 1:
            continue
        params = [a.arg for a in found[0].args.args]
        if isinstance(f, ast.Attribute) and params[:1] == ["self"]:
            params = params[1:]
        names = holders | {p for p, a in zip(params, call.args)
                           if isinstance(a, ast.Name) and a.id in holders}
        inner = sorted((n for n in _own(found[0]) if hasattr(n, "lineno")),
                       key=lambda x: x.lineno)
        hit = next((n for n in inner if _fills(n, names)), None)
        if hit is not None:
            return Site(path, hit.lineno, found[0].name, hit.col_offset)  # type: ignore
    return None


__all__ = ["kept_store"]
