"""Where the file calls an instance of one of its module classes, and what it passes.

# NOTE [instance calls]
``model = ResNet(); ...; loss = F.cross_entropy(model(images), labels)`` runs
``ResNet.forward`` with ``x = images``: what ``forward`` is given is what the call sites of
its instances pass (the instance's kind read by the analysis layer: NOTE [kinds]). A fact
about every such value at every call site (a batch of data, a new tensor that requires no
grad) is a fact about the parameter inside ``forward``. No call site found: nothing is known.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.nodes import function_scopes, scope_nodes

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def instance_calls(ctx: Context, cls: str) -> list[tuple[ast.Call, ast.AST]]:
    """(call, the function or module holding it) for every call of an instance of the
    module class ``cls`` of the file (``model(x)``, ``self.net(x)``), found once per file."""
    table: dict[str, list[tuple[ast.Call, ast.AST]]] = ctx.memo(
        "instance-calls", ctx.tree, lambda: _index(ctx))
    return table.get(cls, [])


def _index(ctx: Context) -> dict[str, list[tuple[ast.Call, ast.AST]]]:
    a = ctx.analysis
    own = {c.name for c in a.classes.values() if c.is_module}
    out: dict[str, list[tuple[ast.Call, ast.AST]]] = {}
    if not own:
        return out
    for fn in function_scopes(ctx.tree):
        for n in scope_nodes(fn):
            if isinstance(n, ast.Call) and isinstance(n.func, (ast.Name, ast.Attribute)) \
                    and not (isinstance(n.func, ast.Name) and n.func.id in own):
                k = a.kind_in(n.func, fn, n.lineno)
                if k is None and isinstance(n.func, ast.Attribute) and n.func.attr == "forward":
                    k = a.kind_in(n.func.value, fn, n.lineno)  # `encoder.forward(x)` runs it too
                if k is not None and k.what == MODULE and k.cls in own:
                    out.setdefault(k.cls, []).append((n, fn))
    return out


def passed_values(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str
                  ) -> list[tuple[ast.expr, ast.AST]] | None:
    """(value, where) that every call of an instance passes for the parameter ``name`` of
    ``forward`` ``fn`` (NOTE [instance calls]); None when a call passes it in a way not read
    (``*args``) or there is no call."""
    cls = ctx.analysis.class_of(fn)
    if cls is None or not cls.is_module or fn.name != "forward":
        return None
    names = [x.arg for x in (*fn.args.posonlyargs, *fn.args.args)][1:]
    out: list[tuple[ast.expr, ast.AST]] = []
    for call, where in instance_calls(ctx, cls.name):
        if any(isinstance(x, ast.Starred) for x in call.args) or \
                any(k.arg is None for k in call.keywords):
            return None
        binds = dict(zip(names, call.args))
        binds.update((k.arg, k.value) for k in call.keywords if k.arg)
        if name not in binds:
            return None
        out.append((binds[name], where))
    return out or None
