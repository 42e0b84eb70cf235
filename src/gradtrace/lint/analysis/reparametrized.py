"""Calls of torch that swap a module's parameter for new ones (weight normalisation)."""
from __future__ import annotations

import ast

from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted

# NOTE [weight norm replaces]
# ``torch.nn.utils.parametrizations.weight_norm(m)`` registers two new Parameters
# (``parametrizations.weight.original0``/``original1``) and drops ``m.weight``; the legacy
# ``torch.nn.utils.weight_norm(m)`` does the same with ``weight_g``/``weight_v``. An optimizer
# built before holds the dropped tensor: the weight never moves again (checked on torch 2.13).
# ``spectral_norm`` and ``orthogonal`` (both APIs) keep the original Parameter object and are
# not listed.
REPLACING = frozenset({"torch.nn.utils.parametrizations.weight_norm",
                       "torch.nn.utils.weight_norm", "torch.nn.utils.weight_norm.weight_norm"})
_WALKS = frozenset({"modules", "children"})


def reparametrized(call: ast.Call, scope: Scope) -> str | None:
    """The dotted module whose parameters ``call`` replaces (NOTE [weight norm replaces]):
    its first argument, or the module a loop variable walks (``for layer in net:``,
    ``for m in net.modules():``)."""
    if not call.args or scope.ctx.call_name(call) not in REPLACING:
        return None
    target = dotted(call.args[0])
    if target is None or "." in target:
        return target
    b = scope.binding_before(target, call.lineno)
    loop = b.stmt if b is not None else None
    if isinstance(loop, (ast.For, ast.AsyncFor)) and isinstance(loop.target, ast.Name):
        it = loop.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) \
                and it.func.attr in _WALKS and not it.args:
            it = it.func.value
        return dotted(it) if isinstance(it, (ast.Name, ast.Attribute)) else None
    return target
