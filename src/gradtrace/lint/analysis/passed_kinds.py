"""What a function's parameter holds, read from every call of the function in the project.

# NOTE [kinds by the callers]
``def train_step(model, epochs, optimizer, loss_fn, scheduler, loader): ... optimizer.zero_grad();
loss.backward(); scheduler.step()`` says nothing by itself of what ``optimizer`` and
``scheduler`` are; its calls do (``pipeline.py``: ``optimizer = torch.optim.Adam(...)``,
``scheduler = StepLR(optimizer, ...)``, ``train_step(model, n, optimizer, loss_fn, scheduler,
...)``). When every call of a top-level function, in its own file and in the project's other
files (NOTE [reverse index]), passes for a parameter a name bound, where the call is made, to
a ``torch.optim.lr_scheduler`` object (or to a ``torch.optim`` optimizer), the parameter holds
one. A call the index cannot resolve, a starred argument, or a value of another kind leaves
it unknown. The file's own calls alone give every kind in the core lookup
(NOTE [parameter kinds]); this one adds the project's other files for these two kinds (one
lookup should do both).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.analysis.callers import foreign_sites
from gradtrace.lint.grad_modes import FUNCTION_TYPES

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

SCHEDULER, OPTIMIZER = "scheduler", "optimizer"


def passed_kind(ctx: Context, fn: ast.AST, param: str) -> str | None:
    """:data:`SCHEDULER` or :data:`OPTIMIZER` when every call of ``fn`` passes one for
    ``param`` (NOTE [kinds by the callers]); None: unknown."""
    if not isinstance(fn, FUNCTION_TYPES) or fn not in ctx.tree.body:
        return None
    return ctx.memo("param-kind:" + param, fn, lambda: _kind_of(ctx, fn, param))


def _kind_of(ctx: Context, fn: ast.FunctionDef, param: str) -> str | None:
    names = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    if param not in names and param not in (a.arg for a in fn.args.kwonlyargs):
        return None
    idx = names.index(param) if param in names else None
    sites = [(ctx, c, next((o for o in reversed(outer) if isinstance(o, FUNCTION_TYPES)),
                           ctx.tree))
             for c, _, outer in call_sites(ctx, fn.name) if isinstance(c.func, ast.Name)]
    others = foreign_sites(ctx, fn)
    if others is None:
        return None
    sites += [(s.ctx, s.call, s.where) for s in others]
    kinds = {_passed(octx, call, where, idx, param) for octx, call, where in sites}
    return kinds.pop() if len(kinds) == 1 else None


def _passed(octx: Context, call: ast.Call, where: ast.AST, idx: int | None, param: str
            ) -> str | None:
    arg = next((k.value for k in call.keywords if k.arg == param), None)
    if arg is None and idx is not None and idx < len(call.args) and not any(
            isinstance(a, ast.Starred) for a in call.args[:idx + 1]):
        arg = call.args[idx]
    if not isinstance(arg, ast.Name):
        return None
    b = octx.scope(where).binding_before(arg.id, call.lineno)
    if b is None and where is not octx.tree:
        b = octx.scope(octx.tree).binding_before(arg.id, 10**9)
    v = b.value if b is not None else None
    q = (octx.qualified_name(v.func) or "") if isinstance(v, ast.Call) else ""
    if q.startswith("torch.optim.lr_scheduler."):
        return SCHEDULER
    if q.startswith("torch.optim.") and q.count(".") == 2:
        return OPTIMIZER
    return None
