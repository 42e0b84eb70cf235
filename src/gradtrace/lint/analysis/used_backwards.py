"""``.backward(...)`` calls whose result the code uses: a hand-written backward pass.

# NOTE [backward result used]
``Tensor.backward()`` returns None. Code that binds the result of ``x.backward(g)`` to a name
it reads again (``grad_in = module.backward(grad_out)``, then ``return grad_in``), or hands it
as the argument of another ``.backward(...)`` (``model.backward(criterion.backward())``, or
``model.backward(g)`` with ``g`` bound from one), runs a hand-written backward pass: a
from-scratch framework whose ``Module.backward(gradwrtoutput)`` returns the gradient of its
input, the chain rule applied by hand. Such a call differentiates
no graph and fills no ``.grad``: it is not a backward step of autograd.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def used_backwards(ctx: Context) -> frozenset[int]:
    """ids of the ``.backward(...)`` calls of the file whose result is used (NOTE above)."""
    if ".backward(" not in ctx.code:
        return frozenset()
    return ctx.memo("used-backwards", ctx.tree, lambda: _used(ctx.tree))


def _backward(n: ast.AST) -> bool:
    return isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
        and n.func.attr == "backward"


def _used(tree: ast.Module) -> frozenset[int]:
    out: set[int] = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        nodes = list(ast.walk(fn))
        read = {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        made = {n.targets[0].id for n in nodes if isinstance(n, ast.Assign) and _backward(
            n.value) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)}
        for n in nodes:
            if _backward(n) and n.args and (_backward(n.args[0]) or isinstance(
                    n.args[0], ast.Name) and n.args[0].id in made):
                out.update((id(n), id(n.args[0])))  # `model.backward(crit.backward())`
            elif isinstance(n, ast.Assign) and _backward(n.value) and len(n.targets) == 1 \
                    and isinstance(n.targets[0], ast.Name) and n.targets[0].id in read:
                out.add(id(n.value))  # `g = layer.backward(g)`, the result read again
    return frozenset(out)
