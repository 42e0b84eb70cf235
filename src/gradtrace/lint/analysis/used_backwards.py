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
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


# what a file must spell for a result to be used: `g = m.backward(`, `.backward(x.backward(`
_SPELLED = re.compile(r"=[^=\n]*\.backward\(|\.backward\([^()\n]*\.backward\(")


def used_backwards(ctx: Context) -> frozenset[int]:
    """ids of the ``.backward(...)`` calls of the file whose result is used (NOTE above)."""
    if ".backward(" not in ctx.code:
        return frozenset()
    return ctx.memo("used-backwards", ctx.tree, lambda: _used(ctx.tree) if _SPELLED.search(
        ctx.code) else frozenset())


def _backward(n: ast.AST) -> bool:
    return isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
        and n.func.attr == "backward"


FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _used(tree: ast.Module) -> frozenset[int]:
    """One walk: per function body (nested functions apart), the names it reads, the names
    it binds to a backward's result, and its backward calls."""
    out: set[int] = set()
    todo: list[ast.AST] = [tree]
    while todo:
        fn = todo.pop()
        read: set[str] = set()
        made: dict[str, ast.Call] = {}
        calls: list[ast.Call] = []
        stack = list(ast.iter_child_nodes(fn))
        while stack:
            n = stack.pop()
            if isinstance(n, FUNCS):
                todo.append(n)
                continue
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                read.add(n.id)
            elif isinstance(n, ast.Assign) and _backward(n.value) and len(n.targets) == 1 \
                    and isinstance(n.targets[0], ast.Name):
                made[n.targets[0].id] = n.value  # type: ignore[assignment]
            elif _backward(n) and n.args:  # type: ignore[union-attr]
                calls.append(n)  # type: ignore[arg-type]
            stack.extend(ast.iter_child_nodes(n))
        out.update(id(v) for k, v in made.items() if k in read)  # `g = m.backward(g)`, read
        for c in calls:
            a = c.args[0]
            if _backward(a) or isinstance(a, ast.Name) and a.id in made:
                out.update((id(c), id(a)))  # `model.backward(crit.backward())`
    return frozenset(out)
