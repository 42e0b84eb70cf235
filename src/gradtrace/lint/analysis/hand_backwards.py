"""Whether another file of the project calls a layer's ``backward`` method by hand.

# NOTE [backward called elsewhere]
A normalizing flow's layer is an ``nn.Module`` whose ``backward(self, z, log_df_dz)`` is the
inverse transform, not a gradient rule: the flow that holds the layers calls it by hand
(``z, log_df_dz = layer.backward(z, log_df_dz)``), often in another file of the project. Such
a call hands ``backward`` as many positional arguments as the method takes; a tensor's
``loss.backward()`` hands none (or only the gradient seed, ``y.backward(g)``, which a
one-argument method cannot be told from: a file that does this is read as calling its
layers, as in the checked file). The project's other files whose bytes hold ``.backward(``
(NOTE [reverse index]; at most :data:`READERS` of them, more: unknown) are read for a call
``x.backward(a, b, ...)`` whose positional arguments fit the method's signature, is not made
on ``torch.autograd``, and is not a value seeded with itself (``loss.backward(loss)``).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.callers import readers
from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.names import dotted

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

READERS = 24  # files holding `.backward(` parsed at most; more: unknown


def called_elsewhere(ctx: Context, fn: ast.FunctionDef) -> bool:
    """Some other file of the project calls ``x.backward(...)`` with the positional
    arguments ``fn`` (a method ``backward(self, ...)``) takes; False when unknown or none
    does (NOTE [backward called elsewhere])."""
    a = fn.args
    params = [*a.posonlyargs, *a.args][1:]
    if a.vararg is not None or not params:
        return False
    least = len(params) - len(a.defaults)
    found = readers(ctx, b".backward(", limit=READERS)
    return bool(found) and any(_fits(octx, least, len(params)) for octx in found)


def _fits(octx: Context, least: int, most: int) -> bool:
    for call, _s, _outer in call_sites(octx, "backward"):
        f = call.func
        n = len(call.args)
        if not isinstance(f, ast.Attribute) or not max(least, 1) <= n <= most \
                or any(isinstance(x, ast.Starred) for x in call.args) \
                or (octx.qualified_name(f.value) or "") == "torch.autograd":
            continue
        recv = dotted(f.value)
        if n == 1 and recv is not None and recv == dotted(call.args[0]):
            continue  # `loss.backward(loss)`: a seed, not a layer's inputs
        return True
    return False
