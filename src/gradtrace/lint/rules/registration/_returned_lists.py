"""GT401: a plain container a helper of the file builds and returns (NOTE [returned containers])."""
from __future__ import annotations

import ast
import re

from gradtrace.lint.analysis.list_elements import container_elements
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import of_types, walk
from gradtrace.lint.rules.registration._local_lists import _local_lists

# NOTE [returned containers]: ``self.layers = self._make_layers(sizes)`` with ``def
# _make_layers(self, sizes): return [nn.Linear(a, b) for ...]`` (or a local list filled with
# ``append`` and returned, or a function of the file called by name): the attribute holds the
# plain ``list``/``dict`` the helper returns, and ``nn.Module.__setattr__`` registers only
# Modules and Parameters, so its layers are in neither ``parameters()`` nor ``state_dict()``
# (torch 2.13). The helper counts only when every ``return`` of it is such a container; one
# that returns ``nn.Sequential(*layers)`` or ``nn.ModuleList(layers)`` registers them.


def builder(fn: ast.AST, ctx: Context) -> tuple[str, list[ast.AST]] | None:
    """("list" | "dict", the elements) when every ``return`` of the function ``fn`` is a
    container display or comprehension, or a local list, holding something built (a call):
    asked per function a class stores the result of (NOTE [returned containers])."""
    if not isinstance(fn, ast.FunctionDef):
        return None
    return ctx.memo("gt401-builder", fn, lambda: _builder(fn))


def _builder(fn: ast.FunctionDef) -> tuple[str, list[ast.AST]] | None:
    displays = (ast.List, ast.ListComp, ast.Dict, ast.DictComp)
    rets = of_types(fn, (ast.Return,))
    if not rets or any(not isinstance(r.value, (*displays, ast.Name)) for r in rets):
        return None
    if any(f is not fn for f in of_types(fn, (ast.FunctionDef, ast.Lambda))):
        return None  # a nested function's returns are not this one's
    kinds: set[str] = set()
    elts: list[ast.AST] = []
    for r in rets:
        got = container_elements(r.value)
        if got is None and isinstance(r.value, ast.Name):
            local = _local_lists(fn).get(r.value.id)
            got = ("list", list(local[0])) if local is not None else None
        if got is None or not got[1]:
            return None
        kinds.add(got[0])
        elts.extend(got[1])
    elts = [_bound(e, fn) for e in elts]
    if len(kinds) != 1 or not any(isinstance(e, ast.Call) for e in elts):
        return None  # something built: maybe a layer
    return kinds.pop(), elts


def _bound(e: ast.AST, fn: ast.FunctionDef) -> ast.AST:
    """What the local ``e`` of ``fn`` is bound to, when one plain assignment binds it."""
    if not isinstance(e, ast.Name):
        return e
    found = [n.value for n in walk(fn) if isinstance(n, ast.Assign) and len(n.targets) == 1
             and isinstance(n.targets[0], ast.Name) and n.targets[0].id == e.id]
    return found[0] if len(found) == 1 else e


STORE = re.compile(r"self\.\w+\s*=\s*(self\.)?(\w+)\(")


def stores_built(text: str, cls: str, ctx: Context) -> bool:
    """A class's text gate: it stores (``self.x = [self.]f(``) the result of a function of the
    file, or a method of its own, that :func:`builder` holds."""
    for m in STORE.finditer(text):
        if builder(_callee(bool(m.group(1)), m.group(2), cls, ctx), ctx) is not None:
            return True
    return False


def _callee(method: bool, name: str, cls: str, ctx: Context) -> ast.AST | None:
    if not method:
        return ctx.analysis.functions.get(name)
    owner = ctx.analysis.classes.get(cls)
    return next((s for s in owner.node.body if isinstance(s, ast.FunctionDef)
                 and s.name == name), None) if owner is not None else None


def returned_entries(value: ast.AST, cls: str, ctx: Context
                     ) -> tuple[str, list[ast.AST], ast.AST] | None:
    """(kind, elements, the helper) when ``value`` calls a function of the file, or a method
    of the class ``cls`` through ``self``, that :func:`builder` holds."""
    if not isinstance(value, ast.Call) or any(isinstance(a, ast.Starred) for a in value.args):
        return None
    f = value.func
    fn = None
    if isinstance(f, ast.Name):
        fn = _callee(False, f.id, cls, ctx)
    elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
        fn = _callee(True, f.attr, cls, ctx)
    got = builder(fn, ctx) if fn is not None else None
    return (got[0], got[1], fn) if got is not None else None
