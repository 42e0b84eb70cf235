"""Where a module held by ``self.<attr>`` runs, and whether grad is on there: its calls in the
methods of its class, a method that only returns (or computes from) its call counted at the
method's own call sites. ``None`` when the module is used in a way this cannot follow (passed
on, stored elsewhere, a submodule of it called, a helper called from outside the class):
then it may run with grad somewhere else (docs/triage/static23b.md)."""
from __future__ import annotations

import ast

from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import parent_map, walk

# methods of a module that do not run it
NOT_RUNS = frozenset({
    "parameters", "named_parameters", "buffers", "named_buffers", "modules", "named_modules",
    "children", "named_children", "train", "eval", "to", "cuda", "cpu", "float", "half",
    "double", "state_dict", "load_state_dict", "zero_grad", "requires_grad_", "apply",
    "register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook",
})


class Run:
    """A call that runs the module (or a method of the class that does), and whether grad
    is off there."""

    def __init__(self, call: ast.Call, off: bool) -> None:
        self.call = call
        self.off = off


def _method_of(cls: ast.ClassDef, node: ast.AST, parents: dict[int, ast.AST]
               ) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    n = parents.get(id(node))
    while n is not None and n is not cls:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and parents.get(id(n)) is cls:
            return n
        n = parents.get(id(n))
    return None


def _off(ctx: Context, fn: ast.AST, node: ast.AST) -> bool:
    return ctx.scope(fn).grad_off_at(node) is not None


def self_module_runs(ctx: Context, cls: ast.ClassDef, attr: str) -> list[Run] | None:
    """The runs of ``self.<attr>`` in ``cls``, or None when some use is not understood."""
    parents = ctx.memo("s23b-parents", cls, lambda: parent_map(cls))
    runs: list[Run] = []
    for n in walk(cls):
        if not (isinstance(n, ast.Attribute) and n.attr == attr and isinstance(n.ctx, ast.Load)
                and isinstance(n.value, ast.Name) and n.value.id == "self"):
            continue
        p = parents.get(id(n))
        fn = _method_of(cls, n, parents)
        if fn is None:
            return None
        if isinstance(p, ast.Attribute):
            g = parents.get(id(p))
            if isinstance(g, ast.Call) and g.func is p and p.attr not in NOT_RUNS:
                return None          # a method or a submodule of it runs
            continue                 # a setting read (`self.enc.out_dim`) or a harmless call
        if not (isinstance(p, ast.Call) and p.func is n):
            return None              # passed on, stored, returned
        if _off(ctx, fn, p):
            runs.append(Run(p, True))
            continue
        through = _method_runs(ctx, cls, fn, parents)
        if through is None:
            return None
        runs.extend(through)
    return runs


def _method_runs(ctx: Context, cls: ast.ClassDef, fn: ast.AST, parents: dict[int, ast.AST]
                 ) -> list[Run] | None:
    """The call sites of method ``fn`` (all in its class, as ``self.<name>(...)``)."""
    name = getattr(fn, "name", "")
    if name.startswith("__") or any(isinstance(d, ast.Name) and d.id == "property"
                                    for d in getattr(fn, "decorator_list", ())):
        return None
    calls = ctx.memo("s23b-attr-uses", ctx.tree, lambda: _attr_uses(ctx.tree))
    sites = calls.get(name, [])
    out: list[Run] = []
    for n in sites:
        p = parents.get(id(n))
        if p is None or not (isinstance(p, ast.Call) and p.func is n) \
                or dotted(n.value) != "self":
            return None
        caller = _method_of(cls, n, parents)
        if caller is None or caller is fn:
            return None
        out.append(Run(p, _off(ctx, caller, p)))
    return out or None


def _attr_uses(tree: ast.AST) -> dict[str, list[ast.Attribute]]:
    out: dict[str, list[ast.Attribute]] = {}
    for n in walk(tree):
        if isinstance(n, ast.Attribute):
            out.setdefault(n.attr, []).append(n)
    return out
