"""Values a file builds inside a factory function and hands out through its callers.

# NOTE [factory-built value]
``def get_scheduler(opt, cfg): ... s = ReduceLROnPlateau(opt); ... return s`` builds the value
in one function and its callers bind it: ``self.sched = get_scheduler(o, cfg)``, or collect it,
``self.schedulers = [get_scheduler(o, cfg) for o in self.optimizers]`` (each element may be
it). A rule that pairs the built value with its uses (``self.sched.step()``, ``for s in
self.schedulers: s.step()``) follows those bindings: the value, not the spelling, decides.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def factory_of(call: ast.Call, owner: dict[int, ast.AST]) -> ast.AST | None:
    """The function that returns the value of ``call``: ``return Call(...)``, or the name it
    is bound to, returned in the same function."""
    fn = owner.get(id(call))
    if not isinstance(fn, FUNCS):
        return None
    name = None
    for st in walk(fn):
        if owner.get(id(st)) is not fn:
            continue
        if isinstance(st, ast.Return) and st.value is call:
            return fn
        if isinstance(st, ast.Assign) and st.value is call and len(st.targets) == 1 \
                and isinstance(st.targets[0], ast.Name):
            name = st.targets[0].id
    if name is not None and any(
            isinstance(r, ast.Return) and isinstance(r.value, ast.Name) and r.value.id == name
            and owner.get(id(r)) is fn for r in walk(fn)):
        return fn
    return None


def _calls_factory(e: ast.AST, fn: ast.AST) -> bool:
    return isinstance(e, ast.Call) and (d := dotted(e.func)) is not None and \
        d in (fn.name, f"self.{fn.name}")  # type: ignore[attr-defined]


def bound_results(fn: ast.AST, ctx: Context, owner: dict[int, ast.AST]
                  ) -> Iterator[tuple[str, bool, ast.AST]]:
    """(dotted target, is a collection, owner of the binding) for each binding of the
    factory's result in the file: ``x = f(...)`` (False), ``xs = [f(o) for o in ...]``,
    ``xs = [f(a), f(b)]`` and ``xs.append(f(...))`` (True)."""
    for n in walk(ctx.tree):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 \
                and (target := dotted(n.targets[0])):
            v = n.value
            if _calls_factory(v, fn):
                yield target, False, owner.get(id(n), ctx.tree)
            elif isinstance(v, ast.ListComp) and _calls_factory(v.elt, fn) or isinstance(
                    v, (ast.List, ast.Tuple)) and any(_calls_factory(e, fn) for e in v.elts):
                yield target, True, owner.get(id(n), ctx.tree)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr == "append" and len(n.args) == 1 \
                and _calls_factory(n.args[0], fn) and (target := dotted(n.func.value)):
            yield target, True, owner.get(id(n), ctx.tree)


def element_calls(target: str, method: str, where: ast.AST, ctx: Context,
                  owner: dict[int, ast.AST]) -> Iterator[ast.Call]:
    """``v.<method>()`` without arguments inside ``for v in <target>:`` loops of the function
    ``where`` (of its class, for a ``self.`` target)."""
    cls = ctx.analysis.class_of(where) if target.startswith("self.") else None
    for loop in walk(ctx.tree):
        if not (isinstance(loop, (ast.For, ast.AsyncFor)) and dotted(loop.iter) == target
                and isinstance(loop.target, ast.Name)):
            continue
        at = owner.get(id(loop))
        if not (at is where or cls is not None and ctx.analysis.class_of(at) is cls):
            continue
        v = loop.target.id
        for st in loop.body:
            for c in walk(st):
                if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) \
                        and c.func.attr == method and not c.args and not c.keywords \
                        and dotted(c.func.value) == v:
                    yield c
