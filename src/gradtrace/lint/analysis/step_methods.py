"""Methods of a module class that the training loop calls on an instance, every step.

# NOTE [per-step methods]
What a script does to a module after building it decides some findings as much as the class
does: ``model.set_weights()`` called in the loop that runs ``backward()`` runs the method on
every step, as ``forward`` does. A method is *per step* when a call ``<recv>.<method>(...)``
sits in a ``for``/``while`` loop whose body (same function) also calls ``backward()``, and the
receiver is an instance of the class: its kind read where the call is (:mod:`.facts`), or passed
by every caller of the enclosing function (NOTE [parameter kinds]). A loop that also
builds an optimizer re-collects the parameters at each step, so its calls are left out. The
methods those methods call through ``self`` are per step too. Found once per class.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context

Fn = ast.FunctionDef | ast.AsyncFunctionDef
LOOPS = (ast.For, ast.AsyncFor, ast.While)
SKIPPED = frozenset({"__init__", "forward"})


def per_step_methods(ctx: Context, cls: ClassInfo) -> list[Fn]:
    """The methods of ``cls`` (a module class of this file) that a training loop of the file
    calls on an instance of it at every step, with the methods they call through ``self``
    (NOTE [per-step methods]); in the order found."""
    return ctx.memo("per-step-methods", cls.node, lambda: _find(ctx, cls))


def _find(ctx: Context, cls: ClassInfo) -> list[Fn]:
    todo = [name for name in cls.methods if name not in SKIPPED and not name.startswith("__")
            and any(_per_step(ctx, cls, call, outer)
                    for call, _, outer in call_sites(ctx, name))]
    out: list[Fn] = []
    seen: set[str] = set()
    while todo:
        name = todo.pop(0)
        m = cls.methods.get(name)
        if m is None or name in seen or name in SKIPPED:
            continue
        seen.add(name)
        out.append(m)
        todo.extend(n.func.attr for n in walk(m) if isinstance(n, ast.Call)
                    and isinstance(n.func, ast.Attribute) and dotted(n.func.value) == "self")
    return out


def _per_step(ctx: Context, cls: ClassInfo, call: ast.Call, outer: tuple[ast.AST, ...]) -> bool:
    f = call.func
    if not isinstance(f, ast.Attribute) or dotted(f.value) in (None, "self"):
        return False
    loop, fn = None, None
    for o in reversed(outer):
        if isinstance(o, FUNCTION_TYPES) or isinstance(o, ast.ClassDef):
            fn = o
            break
        if loop is None and isinstance(o, LOOPS):
            loop = o
    if loop is None or isinstance(fn, ast.ClassDef) or not _trains(ctx, loop):
        return False
    where = fn if fn is not None else ctx.tree
    k = ctx.analysis.kind_in(f.value, where, call.lineno)
    return k is not None and k.what == MODULE and k.cls == cls.name


def _trains(ctx: Context, loop: ast.AST) -> bool:
    """The loop's body calls ``backward()`` and builds no optimizer."""
    backward = False
    for n in walk(loop):
        if isinstance(n, ast.Call):
            if isinstance(n.func, ast.Attribute) and n.func.attr == "backward":
                backward = True
            elif (ctx.call_name(n) or "").startswith("torch.optim."):
                return False
    return backward
