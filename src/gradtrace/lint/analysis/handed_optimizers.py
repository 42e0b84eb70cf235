"""Optimizers a function is handed by every caller of the file, that nothing else steps.

# NOTE [optimizers handed in]
``def train(self, batches, model, w_optim, alpha_optim)`` called only as ``self.train(...,
w_optim, alpha_optim)`` by ``fit``, which builds ``alpha_optim = [torch.optim.Adam([a]) for a in
...]`` (or one ``torch.optim`` optimizer) and reads that name nowhere else: the optimizer (each
element of the list) lives in ``train`` alone, as if ``train`` had built it; what ``train``
does not step, nobody steps. :func:`handed_optimizer` answers for a parameter of a function:
every call of the file (one at least, none unseen: NOTE [parameter kinds]) passes a name of
its caller bound once to such a construction, that the caller reads only as that argument.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.callees import function_sites
from gradtrace.lint.analysis.foreign_params import other_sites
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

SCHEDULERS = "torch.optim.lr_scheduler."


def _builds_optimizers(ctx: Context, v: ast.AST | None) -> bool:
    if isinstance(v, (ast.ListComp, ast.GeneratorExp)):
        v = v.elt
    elif isinstance(v, (ast.List, ast.Tuple)) and v.elts:
        return all(_builds_optimizers(ctx, e) for e in v.elts)
    q = ctx.qualified_name(v.func) or "" if isinstance(v, ast.Call) else ""
    return q.startswith("torch.optim.") and q.count(".") == 2 and not q.startswith(SCHEDULERS)


def handed_optimizer(ctx: Context, fn: ast.AST, param: str) -> bool:
    """Whether every call of ``fn`` in the file passes, for ``param``, an optimizer (or a list
    of them) its caller built and reads only there (NOTE [optimizers handed in])."""
    if not isinstance(fn, FUNCTION_TYPES):
        return False
    sites = function_sites(ctx.analysis, fn)
    if not sites:
        return False
    for call, where in sites:
        if any(isinstance(a, ast.Starred) for a in call.args) \
                or any(k.arg is None for k in call.keywords):
            return False
        v = ctx.analysis.arguments(fn, call).get(param)
        if not isinstance(v, ast.Name) or where is ctx.tree:
            return False
        bs = ctx.scope(where).bindings.get(v.id, [])
        if len(bs) != 1 or not _builds_optimizers(ctx, bs[0].value):
            return False
        reads = [n for n in walk(where) if isinstance(n, ast.Name) and n.id == v.id
                 and isinstance(n.ctx, ast.Load)]
        if any(n is not v for n in reads):
            return False  # read elsewhere in the caller: it may step it
    return True


def stepped_by_a_caller(ctx: Context, fn: ast.AST, param: str) -> bool:
    """Whether a call of ``fn``, in the file or another of the project
    (NOTE [kinds by the callers]), passes, for ``param``, a name its caller steps itself
    (``inner_loop(model, opt, batches); opt.step()``: the helper only fills the gradients, the
    caller applies them)."""
    if not isinstance(fn, FUNCTION_TYPES):
        return False
    sites = [(call, where) for call, where in function_sites(ctx.analysis, fn) or ()]
    sites += [(s.call, s.where) for s in other_sites(ctx, fn)]
    for call, where in sites:
        v = ctx.analysis.arguments(fn, call).get(param)
        if isinstance(v, ast.Name) and any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr == "step" and isinstance(n.func.value, ast.Name)
                and n.func.value.id == v.id for n in walk(where)):
            return True
    return False
