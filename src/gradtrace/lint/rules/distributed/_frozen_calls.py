"""Calls made after a DDP wrap that hand the wrapped model to a function of the file.

# NOTE [frozen through calls]
``model = DistributedDataParallel(net)``, then ``freeze_backbone(model.module)`` (or
``model.module.freeze()``, ``net.freeze()``) whose body freezes part of the module it is given
(``for p in m.backbone.parameters(): p.requires_grad = False``): the freeze happens after the
wrap, one call away. The callee is read from the code (NOTE [backward through calls]; a method
called on ``<wrapper>.module`` is the wrapped class's); the module it freezes is the argument
handed for the parameter the freeze starts from (``self``: the receiver), and it must be the
wrapped model itself. Freezing a whole module given (``for p in m.parameters()``) is left to
the rule's own reading: a teacher frozen whole is fine.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from gradtrace.lint.analysis.called_backwards import called_function
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import bfs_walk
from gradtrace.lint.rules.distributed._ddp import Wrap, wrapped_class, wraps
from gradtrace.lint.rules.registration._grad_flags import grad_flags

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def wrapped_names(w: Wrap, owner: ast.AST, line: int, ctx: Context) -> list[str]:
    """The spellings of the model ``w`` wraps at ``line`` of ``owner``: ``<wrapper>.module``,
    and the wrapped name unless it was rebound since the wrap."""
    names = [f"{w.target}.module"] if w.target else []
    inner = dotted(w.call.args[0]) if w.call.args else None
    if inner is not None and inner != w.target:
        b = ctx.scope(owner).binding_before(inner.partition(".")[0], line)
        if b is None or b.line <= w.line:
            names.append(inner)
    return names


def wrapped_again(w: Wrap, owner: ast.AST, line: int, ctx: Context) -> bool:
    """A later wrap in ``owner`` (after ``line``) takes the model ``w`` wraps again: the new
    DDP hooks the parameters as they are then, so a change made in between reaches it."""
    names = set(wrapped_names(w, owner, line, ctx))
    return any(o.owner is owner and o.line > line and o.call.args
               and dotted(o.call.args[0]) in names for o in wraps(ctx))


def hands_wrapped(call: ast.Call, w: Wrap, owner: ast.AST, ctx: Context) -> bool:
    """``call`` is made on the model ``w`` wraps, or hands it (or a part of it) in."""
    names = wrapped_names(w, owner, call.lineno, ctx)
    f = call.func
    given = [*call.args, *(k.value for k in call.keywords)]
    if isinstance(f, ast.Attribute):
        given.append(f.value)
    for e in given:
        d = dotted(e) if isinstance(e, (ast.Name, ast.Attribute)) else None
        if d is not None and any(d == n or d.startswith(n + ".") for n in names):
            return True
    return False


def callee_after_wrap(call: ast.Call, w: Wrap, owner: ast.AST, ctx: Context
                      ) -> ast.AST | None:
    """The function of the file ``call`` runs; ``<wrapper>.module.method(...)`` runs the
    wrapped class's method."""
    f = call.func
    if isinstance(f, ast.Attribute) and w.target and dotted(f.value) == w.target + ".module":
        cls = wrapped_class(w, ctx)
        return cls.method(f.attr) if cls is not None else None
    return called_function(ctx, owner, call)


def frozen_by_calls(fn: ast.AST, ctx: Context) -> Iterator[tuple[ast.Call, Wrap, str]]:
    """(call, wrap, the part frozen, in the caller's words) for each call of ``fn`` made after
    a wrap without ``find_unused_parameters`` that hands it the wrapped model, when ``fn``
    freezes part of that model (NOTE [frozen through calls])."""
    flags = [f for f in grad_flags(ctx.scope(fn)) if not f.value and not f.conditional
             and "." in f.root]
    if not flags or not isinstance(fn, FUNCTION_TYPES):
        return
    for w in wraps(ctx):
        if w.finds_unused or not isinstance(w.owner, FUNCTION_TYPES) or w.owner is fn:
            continue
        for c in bfs_walk(w.owner):
            if not isinstance(c, ast.Call) or c.lineno <= w.line \
                    or not hands_wrapped(c, w, w.owner, ctx) \
                    or callee_after_wrap(c, w, w.owner, ctx) is not fn:
                continue
            names = wrapped_names(w, w.owner, c.lineno, ctx)
            args = ctx.analysis.arguments(fn, c)
            for flag in flags:
                head, _, rest = flag.root.partition(".")
                given = c.func.value if head == "self" and isinstance(c.func, ast.Attribute) \
                    else args.get(head)
                d = dotted(given) if isinstance(given, (ast.Name, ast.Attribute)) else None
                if d in names:
                    yield c, w, f"{d}.{rest}"
                    break


