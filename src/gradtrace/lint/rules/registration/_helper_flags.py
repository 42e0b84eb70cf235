"""Freezes made by a call: ``apply_freeze(model, FROZEN)`` where ``apply_freeze`` is a function
of the file whose body freezes (all or some) parameters of its argument. Holds no rule.

# NOTE [freeze by a helper]
A freeze written once in a helper (``def apply_freeze(model, patterns): for name, p in
model.named_parameters(): if any(re.match(pat, name) ...): p.requires_grad_(False)``) is a
freeze of whatever each call hands it: the call statement freezes the argument's parameters,
``conditional`` when the helper's freeze is. Only a freeze at the helper's top level counts
(not one under an ``if`` of the helper, which may not run), for a plain function of the file
called by its name with the module as a positional or keyword argument.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.names import indexed_path
from gradtrace.lint.rules.registration._grad_flags import GradFlag, grad_flags

if TYPE_CHECKING:
    from gradtrace.lint.flow import Scope


def helper_freezes(scope: Scope) -> list[GradFlag]:
    """The calls of ``scope`` (statements) to a function of the file that freezes parameters
    of one of its arguments, as flags on that argument (NOTE [freeze by a helper])."""
    ctx = scope.ctx
    out: list[GradFlag] = []
    for s in scope.stmts:
        call = s.value if isinstance(s, (ast.Expr, ast.Assign)) else None
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
            continue
        fn = ctx.analysis.functions.get(call.func.id)
        if fn is None or fn is scope.node:
            continue
        params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
        for f in grad_flags(ctx.scope(fn)):
            base, _, rest = f.root.partition(".")
            if f.value or base not in params or f.stmt not in fn.body:
                continue
            i = params.index(base)
            arg = call.args[i] if i < len(call.args) and not any(
                isinstance(a, ast.Starred) for a in call.args[:i + 1]) else next(
                (k.value for k in call.keywords if k.arg == base), None)
            path = indexed_path(arg) if arg is not None else None
            if path is not None:
                out.append(GradFlag(s, f"{path}.{rest}" if rest else path, False,
                                    f.conditional))
    return out
