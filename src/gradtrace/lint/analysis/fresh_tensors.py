"""Expressions that make a new tensor object at each evaluation, never one of a module's
parameters: ``p.data``, ``p.detach()``, arithmetic, a ``torch`` op, or ``obj.<attr>`` where
every class of the file defining ``<attr>`` defines it as a ``@property`` that computes
(``return F.softplus(self.raw_x)``) and none stores it. Comparing a parameter with one by
identity (``is``, a set) never matches (docs/triage/static23b.md)."""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.param_copies import copy_expr
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

CLONE = "clone"


def _computed_return(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    rets = [n for n in walk(fn) if isinstance(n, ast.Return)]
    return bool(rets) and all(isinstance(r.value, (ast.Call, ast.BinOp, ast.UnaryOp))
                              for r in rets)


def computed_properties(ctx: Context) -> frozenset[str]:
    """Names of the file's properties that always compute a new value."""
    def make() -> frozenset[str]:
        props: dict[str, bool] = {}
        stored: set[str] = set()
        for n in walk(ctx.tree):
            if isinstance(n, ast.ClassDef):
                for f in n.body:
                    if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                            dotted(d) == "property" for d in f.decorator_list):
                        props[f.name] = props.get(f.name, True) and _computed_return(f)
            elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
                stored.add(n.attr)
            elif isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Constant) \
                    and isinstance(n.func, ast.Attribute) and n.func.attr in (
                        "register_parameter", "register_buffer"):
                stored.add(str(n.args[0].value))
        return frozenset(k for k, v in props.items() if v and k not in stored)
    return ctx.memo("s23b-computed-properties", ctx.tree, make)


def property_sources(ctx: Context, name: str) -> frozenset[str]:
    """The ``self.<attr>`` names the file's properties called ``name`` read."""
    out: set[str] = set()
    for n in walk(ctx.tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name \
                and any(dotted(d) == "property" for d in n.decorator_list):
            out.update(a.attr for a in walk(n) if isinstance(a, ast.Attribute)
                       and isinstance(a.value, ast.Name) and a.value.id == "self")
    return frozenset(out)


def frozen_attrs(ctx: Context) -> frozenset[str]:
    """Attribute names the file freezes: ``x.<attr>.requires_grad_(False)``,
    ``x.<attr>.requires_grad = False``."""
    def make() -> frozenset[str]:
        out: set[str] = set()
        for n in walk(ctx.tree):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr == "requires_grad_" and n.args \
                    and isinstance(n.args[0], ast.Constant) and n.args[0].value is False \
                    and isinstance(n.func.value, ast.Attribute):
                out.add(n.func.value.attr)
            elif isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) \
                    and n.value.value is False:
                for t in n.targets:
                    if isinstance(t, ast.Attribute) and t.attr == "requires_grad" \
                            and isinstance(t.value, ast.Attribute):
                        out.add(t.value.attr)
        return frozenset(out)
    return ctx.memo("s23b-frozen-attrs", ctx.tree, make)


def fresh_tensor(e: ast.expr, ctx: Context) -> str | None:
    """How ``e`` is a new tensor (for the message), or None."""
    how = copy_expr(e)
    if how is not None:
        return how
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == CLONE:
        return f"a new tensor at each `.{CLONE}()`"
    if isinstance(e, ast.Attribute) and e.attr in computed_properties(ctx):
        if property_sources(ctx, e.attr) & frozen_attrs(ctx):
            return None   # what it is computed from is frozen: nothing trains it anyway
        return f"`{e.attr}` is a property that computes a new tensor"
    return None
