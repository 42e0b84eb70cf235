"""Expressions that make a new tensor object at each evaluation, never one of a module's
parameters: ``p.data``, ``p.detach()``, arithmetic, a ``torch`` op, or ``obj.<attr>`` where
every class of the file defining ``<attr>`` defines it as a ``@property`` that computes
(``return F.softplus(self.raw_x)``) and none stores it. Comparing a parameter with one by
identity (``is``, a set) never matches (docs/triage/static23b.md)."""
from __future__ import annotations

import ast

from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

COPY_ATTR = "data"
COPY_CALLS = frozenset({"detach", "clone"})


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


def fresh_tensor(e: ast.expr, ctx: Context) -> str | None:
    """How ``e`` is a new tensor (for the message), or None."""
    if isinstance(e, ast.Attribute) and e.attr == COPY_ATTR:
        return "`.data` makes a new tensor"
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr in COPY_CALLS:
        return f"`.{e.func.attr}()` makes a new tensor"
    if isinstance(e, ast.Attribute) and e.attr in computed_properties(ctx):
        return f"`{e.attr}` is a property that computes a new tensor"
    return None
