"""GT401's elements that are containers built from a local list of ``__init__``.

# NOTE [container of a local list]
``row = []``; ``row.append(nn.Sequential(nn.Conv2d(...), ...))`` ...; ``self.fuse.append(
nn.ModuleList(row))`` (HRNet's fuse layers): the ``ModuleList`` (or ``nn.Sequential(*row)``)
holds what the local list holds, so it owns parameters exactly when one of the list's elements
does; kept in a plain list on ``self`` it is as unregistered as a bare layer would be. The list
is read only when it is a local of ``__init__`` that the method binds to list literals and fills
with ``append``/``extend``/``insert``/``+=`` alone, and that it hands to nothing but the one
container call (handed elsewhere or stored on ``self``, the layers may be registered there).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.list_elements import container_elements
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.registration._wrapped_lists import CONTAINER_CTORS, FILLING

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def with_wrapped_locals(elts: list[ast.AST], init: ast.FunctionDef | None, ctx: Context
                        ) -> list[ast.AST]:
    """``elts`` plus, for each ``nn.ModuleList(xs)`` / ``nn.Sequential(*xs)`` over a local
    list ``xs`` of ``init``, the elements ``init`` puts in ``xs``
    (NOTE [container of a local list])."""
    if init is None:
        return elts
    out = list(elts)
    for e in elts:
        name = _wrapped_name(e, ctx)
        if name is not None:
            out.extend(_local_elements(name, e, init) or ())
    return out


def _wrapped_name(e: ast.AST, ctx: Context) -> str | None:
    if not isinstance(e, ast.Call) or len(e.args) != 1 or e.keywords:
        return None
    arg = e.args[0]
    inner = arg.value if isinstance(arg, ast.Starred) else arg
    if not isinstance(inner, ast.Name) or ctx.call_name(e) not in CONTAINER_CTORS:
        return None
    return inner.id


def _local_elements(name: str, wrap: ast.Call, init: ast.FunctionDef) -> list[ast.AST] | None:
    """What ``init`` puts in its local list ``name``; None when ``name`` is anything else
    somewhere (an argument, bound to a non-list, read by another call or stored)."""
    a = init.args
    if name in {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if x}:
        return None
    elts: list[ast.AST] = []
    fill_args: set[int] = set()
    bound: set[int] = set()
    for n in walk(init):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and isinstance(n.func.value, ast.Name) and n.func.value.id == name:
            if n.func.attr not in FILLING or not n.args:
                return None
            got = container_elements(n.args[-1]) if n.func.attr == "extend" else None
            if n.func.attr == "extend" and got is None:
                return None
            elts.extend(got[1] if got else [n.args[-1]])
            fill_args.add(id(n.func.value))
        elif isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                               for t in n.targets):
            got = container_elements(n.value)
            if len(n.targets) != 1 or got is None or got[0] != "list":
                return None
            elts.extend(got[1])
            bound.add(id(n.targets[0]))
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) \
                and n.target.id == name:
            got = container_elements(n.value)
            if got is None:
                return None
            elts.extend(got[1])
            bound.add(id(n.target))
    inner = wrap.args[0]
    inner = inner.value if isinstance(inner, ast.Starred) else inner
    for n in walk(init):  # every other use of the name: only the fills and the one wrap
        if isinstance(n, ast.Name) and n.id == name and n is not inner and (
                id(n) not in fill_args if isinstance(n.ctx, ast.Load) else id(n) not in bound):
            return None
    return elts
