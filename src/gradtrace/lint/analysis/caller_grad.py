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
