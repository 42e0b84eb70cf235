"""Statements a function runs in its caller's grad mode when it turns grad on itself.

# NOTE [grad turned on by the function]
A function that opens ``with torch.enable_grad():`` (or ``torch.set_grad_enabled(True)``)
around part of its body says that its callers run it with grad off: under grad on the block
changes nothing. A guidance or Langevin step handed to a sampler (``langevin_fn`` called
inside the sampler's ``with torch.no_grad():`` of another file), a classifier-guidance
``cond_fn``, an attack run from an evaluation loop are written so. What such a function
computes outside its own grad-on blocks is computed in that grad-off mode: it carries no
graph, as if the statement stood under ``no_grad`` (``analysis/graph_deps.followed_value``).
A function whose decorator sets a grad mode, and the module level, are not read this way.
Known limit: a function that turns grad on defensively and is also called with grad on has
graphs outside the block that this fact does not see.
"""
from __future__ import annotations

import ast

from gradtrace.lint.context import Context
from gradtrace.lint.flow import Binding
from gradtrace.lint.grad_modes import FUNCTION_TYPES, grad_mode_of
from gradtrace.lint.nodes import walk


def caller_grad_off(b: Binding, ctx: Context) -> bool:
    """``b`` is bound in a function that turns grad on in a block of its own, outside every
    such block (NOTE [grad turned on by the function])."""
    return id(b.stmt) in ctx.memo("caller-grad-off", ctx.tree, lambda: _outside(ctx))


def _outside(ctx: Context) -> frozenset[int]:
    if not ctx.mentions("enable_grad", "set_grad_enabled"):
        return frozenset()
    out: set[int] = set()
    for fn in walk(ctx.tree):
        if not isinstance(fn, FUNCTION_TYPES) or any(
                grad_mode_of(d, ctx.imports) for d in fn.decorator_list):
            continue
        scope = ctx.scope(fn)
        on = [(s.lineno, s.end_lineno or s.lineno) for s in scope.stmts
              if isinstance(s, (ast.With, ast.AsyncWith)) and any(
                  grad_mode_of(it.context_expr, ctx.imports) == "on" for it in s.items)]
        if not on:
            continue
        out.update(id(s) for s in scope.stmts
                   if not any(a <= s.lineno <= z for a, z in on))
    return frozenset(out)


# NOTE [grad off by the callers]
# A function every call of which is made with grad off runs with grad off: its in-place
# writes on leaves do not raise, its results carry no graph. The calls are those of its file
# and, through the reverse index (NOTE [reverse index]), of the project's other files: a
# method's are every `x.name(...)` there (an over-approximation, sound for "every call"). A
# call is made with grad off under a grad-off `with` or decorator, after a
# `torch.set_grad_enabled(False)` statement of the same body (an export script's
# `__main__`), or in a function whose own calls all are, MAX_HOPS calls up. No call seen, a
# name used as a value, a project too large: no fact.
MAX_HOPS = 3


def callers_grad_off(ctx: Context, fn: ast.AST, hops: int = 0) -> bool:
    """Every call of ``fn`` (one at least), in its file and the project's other files, is
    made with grad off (NOTE [grad off by the callers])."""
    if not isinstance(fn, FUNCTION_TYPES) or hops > MAX_HOPS:
        return False
    if hops == 0:
        return ctx.memo("callers-grad-off", fn, lambda: _all_off(ctx, fn, 0))
    return _all_off(ctx, fn, hops)


def _all_off(ctx: Context, fn: ast.AST, hops: int) -> bool:
    from gradtrace.lint.analysis.callees import function_sites
    from gradtrace.lint.analysis.callers import _method_sites, _off_at, foreign_sites
    a = ctx.analysis
    cls = a.class_of(fn)
    if cls is None:
        here = function_sites(a, fn)  # type: ignore[arg-type]
    elif fn.name.startswith("__") or fn.name == "forward" \
            or cls.methods.get(fn.name) is not fn:  # type: ignore[attr-defined]
        return False  # `forward`, `__call__`: run through the instance
    else:
        here = _method_sites(ctx, fn.name)  # type: ignore[attr-defined]
    if here is None:
        return False
    away = foreign_sites(ctx, fn)
    if away is None or not here and not away:
        return False
    sites = [(ctx, c, w, None) for c, w in here] + [(s.ctx, s.call, s.where, s.off) for s in away]
    for octx, call, where, off in sites:
        if off is None:
            off = _off_at(octx, call, where)
        if not off and (where is fn or not callers_grad_off(octx, where, hops + 1)):
            return False
    return True
