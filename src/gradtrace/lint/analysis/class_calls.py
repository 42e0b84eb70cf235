"""Every call of a class of the file by its name (``Encoder(...)``), found in one walk per file.

# NOTE [class call index]
GT401 (``passed_in``: what the callers of a module class hand its ``__init__``) and GT703 ask
"where is ``Cls`` called" of several classes of one file (on transformers' modeling files about
four each). One walk per class, each through the statements whose lines name that class
(NOTE [call sites]), went through the module body and the class bodies again for every class.
Here one walk goes through the statements whose lines name any class of the file and files
each call ``Cls(...)`` under its class. The answer for one class is the same list, in the same
order: a call of ``Cls`` lies in a statement whose lines name ``Cls``, which both walks enter,
and the walk is the same depth-first order (last child first) over a tree pruned of subtrees
that hold no such line: pruning more or less keeps the order of the nodes both walks see.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.calls import BODY_FIELDS, ascii_code, holding, word_lines
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.nodes import child_fields, children

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

STATEMENTS = (ast.stmt, ast.excepthandler, ast.match_case, ast.Module)
Calls = list[tuple[ast.AST, ast.Call]]


def class_call_index(ctx: Context) -> dict[str, Calls]:
    """Class name -> (enclosing function or the module, call) for every ``Cls(...)`` call
    of a class of the file, in the walk order of NOTE [class call index] (once per file)."""
    return ctx.memo("class-call-index", ctx.tree, lambda: _index(ctx))  # type: ignore[no-any-return]


def _index(ctx: Context) -> dict[str, Calls]:
    names = ctx.analysis.classes
    out: dict[str, Calls] = {}
    if not names:
        return out
    # statements whose lines name no class hold no such call (NOTE [call sites])
    lines = word_lines(ctx, sorted(names)) if ascii_code(ctx) else None
    stack: list[tuple[ast.AST, ast.AST]] = [(ctx.tree, ctx.tree)]
    while stack:
        owner, n = stack.pop()
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in names:
            got = out.get(n.func.id)
            if got is None:
                out[n.func.id] = [(owner, n)]
            else:
                got.append((owner, n))
        inner = n if isinstance(n, FUNCTION_TYPES) else owner
        if lines is None or not isinstance(n, STATEMENTS):
            stack.extend((inner, c) for c in children(n))
            continue
        for f in child_fields(type(n)):  # children in order, quiet statements left out
            v = getattr(n, f, None)
            if f in BODY_FIELDS:
                stack.extend((inner, c) for c in holding(ctx, n, f, lines))
            elif v.__class__ is list:
                stack.extend((inner, c) for c in v if isinstance(c, ast.AST))
            elif isinstance(v, ast.AST):
                stack.append((inner, v))
    return out
