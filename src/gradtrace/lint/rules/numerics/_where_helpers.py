"""GT751 through a helper: a ``torch.where`` branch that is the call of a plain function of the
file, whose body takes the singular op.

# NOTE [where branch built by a helper]
``torch.where(trace > 0, positive_branch(), other)`` with ``def positive_branch(): sq =
torch.sqrt(trace + 1.0) ...`` (kornia's ``rotation_matrix_to_quaternion``: each case of a
piecewise formula is a closure, all of them run, ``where`` picks one) differentiates the
closure's ops everywhere, like an inline branch. The helper is a function of the file (a
closure of the function, or a module-level one; not a method nor a module's ``forward``, whose
state the operand may read); each singular op in its own statements is judged with its operand
written in the caller's names: the helper's parameters replaced by the call's arguments, and
only when what is left reads no name the helper binds itself (a name of the caller the closure
reads is the caller's). The op's line is the one to change (its input guarded there), so the
finding is reported on it, the ``where`` as related.
"""
from __future__ import annotations

import ast
import copy
from typing import Iterator

from gradtrace.lint.analysis.reach import called_function
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.rules.numerics._ops import singular_uses
from gradtrace.lint.rules.leaf._writes import own_statements


class _Substitute(ast.NodeTransformer):
    def __init__(self, args: dict[str, ast.expr]) -> None:
        self.args = args

    def visit_Name(self, node: ast.Name) -> ast.AST:
        got = self.args.get(node.id)
        return copy.deepcopy(got) if got is not None and isinstance(node.ctx, ast.Load) else node


def _bound_in(fn: ast.AST) -> set[str]:
    """Names the function binds itself (assignment targets, loop targets, nested defs)."""
    out: set[str] = set()
    for s in own_statements(fn.body):  # type: ignore[attr-defined]
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                out.add(n.id)
        if isinstance(s, FUNCTION_TYPES + (ast.ClassDef,)):
            out.add(s.name)
    return out


def _closure(ctx: Context, name: str, line: int) -> ast.AST | None:
    """The def of ``name`` nested in the current function before ``line``, when the function
    binds that name nowhere else."""
    fn = ctx.function
    if fn is None:
        return None
    found: list[ast.AST] = []
    stack = list(fn.body)  # type: ignore[attr-defined]
    while stack:
        s = stack.pop()
        if isinstance(s, FUNCTION_TYPES + (ast.ClassDef,)):
            if s.name == name:
                found.append(s)
            continue
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store):
                return None
        for field in ("body", "orelse", "finalbody", "handlers"):
            stack.extend(getattr(s, field, None) or ())
    return found[0] if len(found) == 1 and found[0].lineno < line else None


def helper_branch_uses(branch: ast.AST, ctx: Context, line: int
                       ) -> Iterator[tuple[ast.AST, str, ast.expr, str]]:
    """(node, op, operand in the caller's names, why) for the singular ops a branch that is a
    helper call takes (NOTE [where branch built by a helper])."""
    if not isinstance(branch, ast.Call) or not isinstance(branch.func, ast.Name) \
            or branch.keywords or any(isinstance(a, ast.Starred) for a in branch.args):
        return
    fn = called_function(branch, ctx.scope(), line) or _closure(ctx, branch.func.id, line)
    if not isinstance(fn, FUNCTION_TYPES) or ctx.analysis.class_of(fn) is not None \
            or fn is ctx.function:
        return
    a = fn.args
    params = [x.arg for x in (*a.posonlyargs, *a.args)]
    if a.vararg or a.kwarg or a.kwonlyargs or len(branch.args) > len(params) \
            or len(params) - len(branch.args) > len(a.defaults):
        return
    given = dict(zip(params, branch.args))
    own = _bound_in(fn) | (set(params) - set(given))
    for s in own_statements(fn.body):
        if not isinstance(s, (ast.Assign, ast.Return, ast.AnnAssign, ast.AugAssign)):
            continue
        for n, op, operand, why in singular_uses(s, ctx):
            if own & {x.id for x in ast.walk(operand) if isinstance(x, ast.Name)}:
                continue
            moved = _Substitute(given).visit(copy.deepcopy(operand))
            ast.copy_location(moved, operand)
            yield n, op, moved, why
