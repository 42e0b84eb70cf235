"""Optimizers of the project whose own ``step`` clears the gradients it applies.

# NOTE [step clears the gradients]
A hand-written optimizer (a hypergradient-descent study's ``SGD``/``SGDHD``/``AdamHD``
classes) may end its ``step`` by clearing each parameter's gradient (``p.grad.zero_()``,
``p.grad = None``, ``self.zero_grad()``). A loop that calls only ``opt.step()`` after
``loss.backward()`` then never applies a sum of batches' gradients: the clearing is in the
step. The optimizer is known when the name is bound in the function to a call of such a
class (of this file, or of another file of the project: NOTE [project index]), or when it is
a parameter of the function and every call of the function in this file (one at least)
passes a name whose every binding there is such a call (``opt = SGDHD(model, lr, beta)`` in
each arm of an ``if``). Anything else (torch's optimizers, a class whose ``step`` clears
nothing, a call from another file) keeps the old reading.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.torch_classes import gradless_optimizer
from gradtrace.lint.names import dotted

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

CLEARING_METHODS = frozenset({"zero_", "detach_"})


def self_managed(ctx: Context, scope: Scope, name: str, line: int) -> bool:
    """The optimizer ``name`` needs no ``zero_grad()`` from the loop: its step reads no
    ``.grad`` (:func:`gradless_optimizer`) or clears the gradients itself
    (NOTE [step clears the gradients])."""
    return gradless_optimizer(ctx, scope, name, line) or step_clears(ctx, scope, name, line)


def step_clears(ctx: Context, scope: Scope, name: str, line: int) -> bool:
    """``name`` (read at ``line`` in ``scope``) is an object of a project class whose ``step``
    clears the gradients (NOTE [step clears the gradients])."""
    b = scope.binding_before(name, line)
    if b is not None:
        return _clearing_call(ctx, b.value)
    fn = scope.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    names = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    if name not in names and name not in [a.arg for a in fn.args.kwonlyargs]:
        return False
    sites = ctx.memo("function-call-sites", ctx.tree, lambda: _sites(ctx.tree)).get(fn.name, [])
    i = names.index(name) if name in names else None
    if not sites:
        return False
    for call, where in sites:
        arg = next((k.value for k in call.keywords if k.arg == name), None)
        if arg is None and i is not None and i < len(call.args) \
                and not any(isinstance(a, ast.Starred) for a in call.args[:i + 1]):
            arg = call.args[i]
        if isinstance(arg, ast.Name):
            bs = [x for x in ctx.scope(where).bindings.get(arg.id, ()) if x.line < call.lineno]
            if not bs or not all(_clearing_call(ctx, x.value) for x in bs):
                return False
        elif not _clearing_call(ctx, arg):
            return False
    return True


def _sites(tree: ast.AST) -> dict[str, list[tuple[ast.Call, ast.AST]]]:
    """Every ``f(...)`` of the file by the plain name called, with the function (or the
    module) it is made in."""
    out: dict[str, list[tuple[ast.Call, ast.AST]]] = {}
    work: list[tuple[ast.AST, ast.AST]] = [(tree, tree)]
    while work:
        node, owner = work.pop()
        for c in ast.iter_child_nodes(node):
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Name):
                out.setdefault(c.func.id, []).append((c, owner))
            inner = c if isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) \
                else owner
            work.append((c, inner))
    return out


def _clearing_call(ctx: Context, v: ast.expr | None) -> bool:
    """``v`` calls a class of the project whose ``step`` clears the gradients."""
    if not isinstance(v, ast.Call):
        return False
    cls = None
    if isinstance(v.func, ast.Name) and v.func.id in ctx.analysis.classes:
        cls = ctx.analysis.classes[v.func.id].node
    else:
        from gradtrace.lint.analysis.project import foreign_def
        got = foreign_def(ctx, v.func)
        cls = got[1] if got is not None else None
    if not isinstance(cls, ast.ClassDef):
        return False
    step = next((m for m in cls.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and m.name == "step"), None)
    return step is not None and any(_clears(n) for n in ast.walk(step))


def _clears(n: ast.AST) -> bool:
    """``p.grad.zero_()``, ``p.grad.data.zero_()``, ``p.grad = None``, ``x.zero_grad()``."""
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
        if n.func.attr == "zero_grad":
            return True
        d = dotted(n.func.value) or ""
        return n.func.attr in CLEARING_METHODS and (d.endswith(".grad") or d.endswith(".grad.data"))
    return isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) \
        and n.value.value is None and any(
            isinstance(t, ast.Attribute) and t.attr == "grad" for t in n.targets)
