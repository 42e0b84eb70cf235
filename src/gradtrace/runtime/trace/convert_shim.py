"""A helper whose whole job is converting what it is handed into a tensor names its caller.

# NOTE [conversion shim]
A backend shim or a ``to_tensor`` helper returns ``torch.as_tensor(P)`` / ``torch.tensor(P)``
(``torch.asarray``) of its own parameter ``P``, possibly behind a type test
(``data if isinstance(data, torch.Tensor) else torch.as_tensor(data)``: DeepXDE's
``backend.as_tensor`` for PyTorch, a lambda in a namespace of backend functions). Building a new
tensor from values is that helper's contract; when the values were tensors with a graph (a list
of loss terms), the graph is lost because the CALLER handed them to it (DeepXDE PR#1379: the fix
stacks the terms at the call instead). So a ``rewrap``/``copy`` cut made on such a return line
is recorded at the first caller outside the helper, like NOTE [grad-free wrapper]'s detach (the
helper's line kept as ``Cut.inner``). A helper that converts a value it computed
(``return torch.tensor(self.scores)``, ``return torch.as_tensor(x * 2)``) keeps its own line;
so do ``forward`` and ``__call__``, and a conversion passing ``requires_grad=`` (a helper that
makes a new trainable leaf: GT104's line is the helper's).
"""
from __future__ import annotations

import ast
from types import CodeType

from gradtrace.runtime.trace.locate import tree_of
from gradtrace.runtime.trace.offstack import function_node

_MAKERS = frozenset({"as_tensor", "tensor", "asarray"})


def _maker(node: ast.AST, params: set[str]) -> bool:
    """``node`` is ``torch.as_tensor(P, ...)`` (or ``tensor``/``asarray``) of a parameter."""
    if not isinstance(node, ast.Call) or not node.args:
        return False
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    arg = node.args[0]
    if any(k.arg == "requires_grad" for k in node.keywords):
        return False  # a new trainable leaf made on purpose (GT104's): the helper's own line
    return name in _MAKERS and isinstance(arg, ast.Name) and arg.id in params


def _converts(expr: ast.AST | None, params: set[str]) -> bool:
    """``expr`` converts a parameter: the conversion itself, or a conditional expression whose
    branches are conversions or the parameter handed back as it is (one conversion at least)."""
    if isinstance(expr, ast.IfExp):
        branches = [expr.body, expr.orelse]
        return any(_converts(b, params) for b in branches) and all(
            _converts(b, params) or isinstance(b, ast.Name) and b.id in params
            for b in branches)
    return expr is not None and _maker(expr, params)


def _params(args: ast.arguments) -> set[str]:
    return {x.arg for x in (*args.posonlyargs, *args.args, *args.kwonlyargs)} - {"self", "cls"}


def _lines(node: ast.AST) -> range:
    return range(node.lineno, (getattr(node, "end_lineno", None) or node.lineno) + 1)


def _lambda(code: CodeType) -> ast.Lambda | None:
    """The one lambda of ``code``'s file that starts on its first line with its parameters."""
    tree = tree_of(code.co_filename)
    if tree is None:
        return None
    n = code.co_argcount + code.co_kwonlyargcount
    names = list(code.co_varnames[:n])
    hits = [x for x in ast.walk(tree) if isinstance(x, ast.Lambda)
            and x.lineno == code.co_firstlineno
            and [a.arg for a in (*x.args.posonlyargs, *x.args.args, *x.args.kwonlyargs)] == names]
    return hits[0] if len(hits) == 1 else None


def conversion_lines(code: CodeType) -> frozenset[int]:
    """The lines where ``code`` returns a conversion of its own parameter (see the NOTE)."""
    if code.co_name == "<lambda>":
        lam = _lambda(code)
        if lam is None or lam.args.vararg or lam.args.kwarg \
                or not _converts(lam.body, _params(lam.args)):
            return frozenset()
        return frozenset(_lines(lam.body))
    fn = function_node(code)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) \
            or fn.name in ("forward", "__call__"):
        return frozenset()
    params = _params(fn.args)
    return frozenset(line for r in ast.walk(fn) if isinstance(r, ast.Return)
                     and _converts(r.value, params) for line in _lines(r))


__all__ = ["conversion_lines"]
