"""Where a value carried across iterations is kept: the attribute store.

# NOTE [state kept on an attribute]
A second backward() fails on a graph freed by the previous one, and the freed value was made
at a line again in this iteration (GT506, "state carried across steps"). When that line is
inside another function (a sub-module's ``forward`` returning ``torch.mm(mask, h)``), the value
is carried by whoever keeps the result, not by the line that computed it. At the failure, the
live objects of the user frames (their ``self``, the modules of their locals and globals and
those modules' sub-modules, the instances of the program's own classes there) are read: a
plain tensor attribute whose ``grad_fn`` was created at that same line is the carrier (it
holds this iteration's value, made the same way), and the one statement of the object's class
that assigns ``self.<attribute>`` (outside ``__init__``, which set it up once) is the line.
A value computed on the storing line itself (``self.v = self.v + x``) names that line as
before; an attribute assigned at several lines of the class leaves the computing line.
The attribute's own node may be made at another line than the freed one (a spiking neuron's
``forward`` computes ``h`` at one line, ``v`` from it at the next, and keeps ``self.v = v``):
then an attribute whose graph holds a node the previous backward() freed, a node the failing
graph holds too, is the carrier (it brought the freed graph into this iteration) when a method
of its class reads ``self.<attribute>`` back (a value only stored, for a log, carries nothing
into the next pass). Every such attribute must name one store. A store of a constant, of
``None`` or of a ``detach()`` result (a ``reset`` method's ``self.v = 0.0``) can keep no graph
and is not counted among the stores.
"""
from __future__ import annotations

import ast
import inspect
import sys
from typing import Any

import torch

from gradtrace.runtime.frames import Site, is_internal, raw_site
from gradtrace.runtime.trace.records import (META_DETACHED, META_FREED, created_site,
                                             decode_meta)


def _objects() -> list[Any]:
    """The ``self`` objects of the live user frames, and the modules (with sub-modules) and
    instances of the program's own classes in their locals and globals."""
    out: dict[int, Any] = {}
    f = sys._getframe(1)
    while f is not None:
        if not is_internal(f.f_code):
            obj = f.f_locals.get("self")
            if obj is not None and isinstance(getattr(obj, "__dict__", None), dict):
                out.setdefault(id(obj), obj)
            for space in (f.f_locals, f.f_globals):
                for v in list(space.values()):
                    if isinstance(v, torch.nn.Module) or _user_object(v):
                        out.setdefault(id(v), v)
        f = f.f_back
    for obj in list(out.values()):
        if isinstance(obj, torch.nn.Module):
            for m in obj.modules():
                out.setdefault(id(m), m)
    return list(out.values())


def _user_object(v: Any) -> bool:
    """An instance of a class the program defined (a method's code is the user's), with a
    ``__dict__``: a plain state holder outside any module."""
    cls = type(v)
    if isinstance(v, type) or not isinstance(getattr(v, "__dict__", None), dict):
        return False
    return any(callable(f) and hasattr(f, "__code__") and not is_internal(f.__code__)
               for f in vars(cls).values())


def _stores(cls: type, attr: str, read: bool = False) -> list[Site]:
    """The statements of ``cls``'s methods but ``__init__`` (which runs once, before any
    iteration) that assign ``self.<attr>``; with ``read``, none unless such a method also
    reads ``self.<attr>``."""
    from gradtrace.runtime.trace.locate import tree_of

    try:
        path = inspect.getsourcefile(cls)
        first = inspect.getsourcelines(cls)[1]
    except (TypeError, OSError):
        return []
    tree = tree_of(path) if path else None
    node = next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)
                 and n.name == cls.__name__ and n.lineno == first), None) if tree else None
    sites = []
    methods = [n for n in ast.walk(node) if isinstance(n, ast.FunctionDef)
               and n.name != "__init__"] if node else []
    if read and not any(isinstance(e, ast.Attribute) and e.attr == attr
                        and isinstance(e.ctx, ast.Load) and isinstance(e.value, ast.Name)
                        and e.value.id == "self" for fn in methods for e in ast.walk(fn)):
        return []
    for fn in methods:
        for st in ast.walk(fn):
            targets = st.targets if isinstance(st, ast.Assign) else []
            flat = [e for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
            if any(isinstance(e, ast.Attribute) and e.attr == attr and isinstance(e.value, ast.Name)
                   and e.value.id == "self" for e in flat) and not _keeps_no_graph(st):
                sites.append(Site(path, st.lineno, fn.name, st.col_offset))  # type: ignore
    return sites


def _keeps_no_graph(st: ast.stmt) -> bool:
    """A plain assignment whose value can hold no graph: a constant, ``None``, a negated
    constant, or a ``detach()`` call's result."""
    value = st.value if isinstance(st, ast.Assign) and len(st.targets) == 1 \
        and not isinstance(st.targets[0], ast.Tuple) else None
    if isinstance(value, ast.UnaryOp):
        value = value.operand
    return isinstance(value, ast.Constant) or (
        isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
        and value.func.attr == "detach" and not value.args)


def _freed_in(roots: list[torch.Tensor], limit: int) -> dict[int, Any]:
    """The metadata dicts (by id, kept alive) of the failing graph's nodes a backward freed."""
    from gradtrace.runtime.trace.graph_walk import graph_nodes
    out: dict[int, Any] = {}
    for node in graph_nodes(roots, limit):
        try:
            meta = node.metadata
        except (AttributeError, RuntimeError):
            continue
        if META_FREED in meta:
            out[id(meta)] = meta
    return out


def _holds(t: torch.Tensor, freed: dict[int, Any], limit: int) -> bool:
    """Does ``t``'s graph (at most ``limit`` nodes) hold one of the ``freed`` nodes?"""
    from gradtrace.runtime.trace.graph_walk import graph_nodes
    for node in graph_nodes([t], limit):
        try:
            if id(node.metadata) in freed:
                return True
        except (AttributeError, RuntimeError):
            continue
    return False


def kept_on_attribute(made: Site | None, roots: list[torch.Tensor] | None = None,
                      limit: int = 2000) -> Site | None:
    """NOTE [state kept on an attribute]: the store of the attribute carrying a value made at
    ``made`` (another line than the store), or None."""
    if made is None:
        return None
    objects = _objects()
    for obj in objects:
        for attr, v in list(vars(obj).items()):
            if not isinstance(v, torch.Tensor) or v.grad_fn is None \
                    or created_site(v.grad_fn)[0] != made:
                continue
            stores = _stores(type(obj), attr)
            if len(stores) == 1 and stores[0] != made:
                return stores[0]
    freed = _freed_in(roots, limit) if roots else {}
    if not freed:
        return None
    found: set[Site] = set()
    for obj in objects:
        for attr, v in list(vars(obj).items()):
            if isinstance(v, torch.Tensor) and v.grad_fn is not None and _holds(v, freed, limit):
                stores = _stores(type(obj), attr, read=True)
                if len(stores) != 1:
                    return None
                found.add(stores[0])
    return found.pop() if len(found) == 1 and made not in found else None


def stamp_detached(t: torch.Tensor) -> None:
    """Mark ``t``'s node with the line that called ``detach()`` on it, the first call kept:
    NOTE [detach result dropped]."""
    gf = t.grad_fn
    if gf is not None and META_DETACHED not in gf.metadata:
        raw = raw_site()
        if raw is not None:
            gf.metadata[META_DETACHED] = (raw[0], raw[1], 0)


def dropped_detach(roots: list[torch.Tensor], limit: int = 5000) -> Site | None:
    """# NOTE [detach result dropped]
    ``detach()`` returns a new tensor and leaves its input attached. When a node of the graph a
    second backward() fails on was freed by the previous backward() and the program had called
    ``detach()`` on its tensor at a line whose statement is that bare call (``h.detach()``, the
    result dropped), that line is where the carried state was meant to leave the graph."""
    from gradtrace.runtime.trace.graph_walk import graph_nodes

    for node in graph_nodes(roots, limit):
        try:
            meta = node.metadata
        except (AttributeError, RuntimeError):
            continue
        if META_FREED in meta and META_DETACHED in meta:
            at = _bare_detach(meta)
            if at is not None:
                return at
    return None


def detach_dropped_on(t: torch.Tensor) -> Site | None:
    """The line whose statement is a bare ``t.detach()`` (its result dropped) called on this
    very tensor, or None: NOTE [detach result dropped]. A tensor later converted to numpy
    while it requires grad was meant to leave the graph there (padertorch's SummaryHook)."""
    try:
        meta = t.grad_fn.metadata if t.grad_fn is not None else None
    except (AttributeError, RuntimeError):
        return None
    return _bare_detach(meta) if meta and META_DETACHED in meta else None


def _bare_detach(meta: Any) -> Site | None:
    """The ``detach()`` line stamped in a node's metadata when its statement is the bare call."""
    from gradtrace.runtime.trace.locate import tree_of

    at = decode_meta(meta[META_DETACHED])[0]
    tree = tree_of(at.path) if at is not None else None
    if tree is not None and any(
            isinstance(n, ast.Expr) and n.lineno == at.line
            and isinstance(n.value, ast.Call)
            and isinstance(n.value.func, ast.Attribute)
            and n.value.func.attr == "detach" for n in ast.walk(tree)):
        return at
    return None


def carried_lead(roots: list[torch.Tensor], made: Site) -> tuple[Site, str]:
    """The line to name for a state carried across iterations, and how the message calls it."""
    dropped = dropped_detach(roots)
    if dropped is not None:
        return dropped, "detached here with its result dropped (`detach()` returns a copy)"
    kept = kept_on_attribute(made, roots)
    if kept is not None:
        return kept, f"computed at {made.path.rsplit('/', 1)[-1]}:{made.line} and kept here"
    return made, "computed here"


__all__ = ["carried_lead", "dropped_detach", "kept_on_attribute", "stamp_detached"]
