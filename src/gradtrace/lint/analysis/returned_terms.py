"""What a function's returns are made of: the ``return`` statements of a body, and which
element of a returned tuple is a term of another (NOTE [helper results] in :mod:`.graph_deps`)."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope


def returned_term(ctx: Context, fn: ast.AST, whole: int, part: int, width: int) -> bool:
    """Whether, in every ``return`` of ``fn`` (a tuple of ``width`` elements), element ``part``
    is a name that element ``whole`` sums (or scales): ``return loss_total, loss_chords`` with
    ``loss_total = loss_chords + 0.01 * loss_kl`` (the caller keeping ``loss_chords`` keeps a
    term of the loss it backpropagates; NOTE [helper results]). An input of the loss
    (``return ce(logits, y), logits``) is not a term: kept by the caller it is a model output,
    which GT505 does not report in a training loop either."""
    scope = ctx.scope(fn)
    rets = [r for r in returns(fn.body) if r.value is not None]  # type: ignore[attr-defined]
    if not rets:
        return False
    for r in rets:
        v = r.value
        if not (isinstance(v, ast.Tuple) and len(v.elts) == width
                and isinstance(v.elts[part], ast.Name)):
            return False
        if v.elts[part].id not in terms(scope, v.elts[whole], r.lineno):  # type: ignore
            return False
    return True


def terms(scope: Scope, e: ast.expr, line: int, depth: int = 0) -> set[str]:
    """The names ``e`` adds, subtracts or scales (``a + 0.5 * b - c`` -> a, b, c), through the
    local names it is bound from (a few steps)."""
    if depth > 4:
        return set()
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        return terms(scope, e.left, line, depth + 1) | terms(scope, e.right, line, depth + 1)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        return terms(scope, e.operand, line, depth + 1)
    if not isinstance(e, ast.Name):
        return set()
    b = scope.binding_before(e.id, line)
    v = b.value if b is not None and isinstance(b.stmt, ast.Assign) else None
    return {e.id} | (terms(scope, v, b.line, depth + 1) if v is not None and b is not None
                     else set())


def returns(body: list[ast.stmt]) -> Iterator[ast.Return]:
    """The ``return`` statements of a body, nested functions and classes excluded."""
    for st in body:
        if isinstance(st, ast.Return):
            yield st
        elif not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for part in ("body", "orelse", "finalbody"):
                yield from returns(getattr(st, part, None) or [])
            for h in getattr(st, "handlers", ()):
                yield from returns(h.body)
            for c in getattr(st, "cases", ()):
                yield from returns(c.body)
