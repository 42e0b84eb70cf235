"""Expressions that surely hold a Python ``int``: the sizes ``torch.arange`` is given.

``torch.arange(n)`` makes an int64 tensor when every bound is a Python int (torch 2.13:
``torch.arange(4).dtype`` is ``torch.int64``, ``torch.arange(4.0)`` is float32), so
``nn.Parameter(torch.arange(n))`` raises ``RuntimeError: Only Tensors of floating point and
complex dtype can require gradients``. An int here: an int literal, ``len(...)``,
``int(...)``, ``x.size(i)``, ``x.numel()``, ``x.dim()``, ``x.shape[i]``, ``+ - * // %`` of ints,
a name whose last binding in its function is one, or a parameter of its function (an
``__init__`` argument) to which every call of the file passes one (``LearnedShift(4)``).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.file_parents import file_parents

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

INT_CALLS = frozenset({"len", "int"})
INT_METHODS = frozenset({"size", "numel", "dim"})
INT_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def python_int(e: ast.expr | None, ctx: Context, depth: int = 0) -> bool:
    """Whether ``e`` (a node of the checked file) surely holds a Python int."""
    if e is None or depth > 4:
        return False
    if isinstance(e, ast.Constant):
        return type(e.value) is int
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        return python_int(e.operand, ctx, depth + 1)
    if isinstance(e, ast.BinOp):
        return isinstance(e.op, INT_OPS) and python_int(e.left, ctx, depth + 1) \
            and python_int(e.right, ctx, depth + 1)
    if isinstance(e, ast.Call):
        f = e.func
        if isinstance(f, ast.Name):
            return f.id in INT_CALLS and len(e.args) == 1 and not e.keywords
        return isinstance(f, ast.Attribute) and f.attr in INT_METHODS and len(e.args) == (
            f.attr == "size") and not e.keywords
    if isinstance(e, ast.Subscript):
        return isinstance(e.value, ast.Attribute) and e.value.attr == "shape" and \
            not isinstance(e.slice, ast.Slice)
    if isinstance(e, ast.Name):
        return _name_int(e, ctx, depth)
    return False


def _name_int(e: ast.Name, ctx: Context, depth: int) -> bool:
    up = file_parents(ctx).get(id(e))
    if up is None:
        return False  # a node of another file
    while up is not None and not isinstance(up, _FUNCS):
        up = file_parents(ctx).get(id(up))
    fn = up if up is not None else ctx.tree
    b = ctx.scope(fn).binding_before(e.id, e.lineno)
    if b is not None:
        return isinstance(b.stmt, ast.Assign) and len(b.stmt.targets) == 1 and \
            isinstance(b.stmt.targets[0], ast.Name) and python_int(b.value, ctx, depth + 1)
    if not isinstance(fn, _FUNCS) or e.id not in {a.arg for a in (*fn.args.posonlyargs,
                                                                   *fn.args.args)}:
        return False
    values = ctx.analysis.argument_values(fn, e.id)
    return bool(values) and all(python_int(v, ctx, depth + 1) for v, _ in values)
