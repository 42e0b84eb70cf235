"""GT401: a plain container a helper of the file builds and returns (NOTE [returned containers])."""
from __future__ import annotations

import ast

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


def builders(ctx: Context) -> dict[ast.AST, tuple[str, list[ast.AST]]]:
    """Function node -> ("list" | "dict", the elements) for every function of the file whose
    every ``return`` is a container display, comprehension or a local list; found once per file
    from the file's returns (NOTE [returned containers])."""
    return ctx.memo("gt401-builders", ctx.tree, lambda: _builders(ctx))


def _builders(ctx: Context) -> dict[ast.AST, tuple[str, list[ast.AST]]]:
    out: dict[ast.AST, tuple[str, list[ast.AST]]] = {}
    for fn in of_types(ctx.tree, (ast.FunctionDef,)):
        rets = of_types(fn, (ast.Return,))
        if not rets or any(r.value is None or not isinstance(
                r.value, (ast.List, ast.ListComp, ast.Dict, ast.DictComp, ast.Name, ast.Call,
                          ast.BinOp)) for r in rets):
            continue
        if any(f is not fn for f in of_types(fn, (ast.FunctionDef, ast.Lambda))):
            continue  # a nested function's returns are not this one's
        kinds: set[str] = set()
        elts: list[ast.AST] = []
        for r in rets:
            got = container_elements(r.value)
            if got is None and isinstance(r.value, ast.Name):
                local = _local_lists(fn).get(r.value.id)
                got = ("list", list(local[0])) if local is not None else None
            if got is None or not got[1]:
                break
            kinds.add(got[0])
            elts.extend(got[1])
        else:
            if len(kinds) == 1:
                out[fn] = (kinds.pop(), [_bound(e, fn) for e in elts])
    return out


def _bound(e: ast.AST, fn: ast.FunctionDef) -> ast.AST:
    """What the local ``e`` of ``fn`` is bound to, when one plain assignment binds it."""
    if not isinstance(e, ast.Name):
        return e
    found = [n.value for n in walk(fn) if isinstance(n, ast.Assign) and len(n.targets) == 1
             and isinstance(n.targets[0], ast.Name) and n.targets[0].id == e.id]
    return found[0] if len(found) == 1 else e


def builder_names(ctx: Context) -> frozenset[str]:
    """The names of the functions :func:`builders` holds: a class's text gate."""
    return ctx.memo("gt401-builder-names", ctx.tree,
                    lambda: frozenset(fn.name for fn in builders(ctx)))


def returned_entries(value: ast.AST, cls: str, ctx: Context
                     ) -> tuple[str, list[ast.AST], ast.AST] | None:
    """(kind, elements, the helper) when ``value`` calls a function of the file, or a method
    of the class ``cls`` through ``self``, that :func:`builders` holds."""
    if not isinstance(value, ast.Call) or any(isinstance(a, ast.Starred) for a in value.args):
        return None
    f = value.func
    fn = None
    if isinstance(f, ast.Name):
        fn = ctx.analysis.functions.get(f.id)
    elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
        owner = ctx.analysis.classes.get(cls)
        fn = next((s for s in owner.node.body if isinstance(s, ast.FunctionDef)
                   and s.name == f.attr), None) if owner is not None else None
    got = builders(ctx).get(fn) if fn is not None else None
    return (got[0], got[1], fn) if got is not None else None
