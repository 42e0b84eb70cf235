"""Probabilities a model gives back, read where a loss takes their log (GT755, GT758).

# NOTE [model probabilities]
``probs = model(x)`` then ``torch.log(probs[torch.arange(n), y])`` (or ``torch.log(probs)``
into ``nll_loss``): the ``forward`` of the model's class (a class of the file) ends in a
softmax on every ``return``, or the ``nn.Sequential`` it is ends in one
(NOTE [module outputs]). :func:`model_probs` follows the log's operand back through names bound once in
the function, views, indexing and the selections that keep values as they are (``gather``,
``masked_select``, ``index_select``, ``take_along_dim``, ``select``, ``narrow``): a
probability that rounds to 0 stays 0 through them. The model must hold a weight
(``grad_values.weighted``): a module that only normalises what it is handed carries no
model's gradient. :func:`model_made` finds the softmax (or what ``made`` recognises) in what
a module call gives back, through a ``forward`` that returns one submodule's output.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from gradtrace.lint.analysis.grad_values import weighted
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.module_outputs import module_output, same_made
from gradtrace.lint.rules.numerics._ops import resolve, strip, torch_op

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

SELECTS = frozenset({"gather", "masked_select", "index_select", "take_along_dim", "select",
                     "narrow"})
MAX_STEPS = 6


def model_made(call: ast.Call, scope: Scope, ctx: Context, made: Any, classes: frozenset[str],
               depth: int = 0) -> ast.AST | None:
    """When ``call`` runs a module whose output is what ``made`` recognises (or a layer of
    ``classes``): that node (in the ``forward`` of a class of the file, read there, or the
    last layer of an ``nn.Sequential``; NOTE [module outputs]). A ``forward`` that returns
    what one submodule gives back (``return self.classifier(x)``) is read through it (three
    levels down)."""
    got = module_output(call, scope, ctx, strip)
    if got is None:
        return None
    fscope, values = got
    if fscope is None:  # the last layer of an nn.Sequential
        last = values[0]
        return last if (ctx.qualified_name(getattr(last, "func", last)) or "") in classes \
            else None
    found = same_made(values, made, ctx, fscope)
    if found is None and depth < 3 and len(values) == 1 and isinstance(values[0], ast.Call):
        return model_made(values[0], fscope, ctx, made, classes, depth + 1)
    return found


def model_probs(e: ast.AST, ctx: Context, line: int, made: Any, classes: frozenset[str]
                ) -> ast.AST | None:
    """NOTE [model probabilities]: the softmax (what ``made`` recognises) of a weighted
    model whose output ``e`` reads, in the function being visited; else None."""
    for _ in range(MAX_STEPS):
        e = strip(e)
        if isinstance(e, ast.Subscript):
            e = e.value
            continue
        got = torch_op(e, ctx) if isinstance(e, ast.Call) else None
        if got is not None and got[0] in SELECTS:
            e = got[1]
            continue
        if isinstance(e, ast.Name):
            v = resolve(e, ctx, line)
            if v is e:
                return None
            e, line = v, getattr(v, "lineno", line)
            continue
        break
    if not isinstance(e, ast.Call) or not isinstance(e.func, (ast.Name, ast.Attribute)):
        return None
    scope = ctx.scope()
    runs = e.func.value if isinstance(e.func, ast.Attribute) and e.func.attr == "forward" \
        else e.func
    k = ctx.analysis.kind(runs, scope, e.lineno)
    if k is None or k.what != MODULE or not weighted(ctx, k.cls, k.node):
        return None
    return model_made(e, scope, ctx, made, classes)
