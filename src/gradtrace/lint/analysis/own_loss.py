"""What a ``forward`` returns beside the loss it computes itself (NOTE [own loss element]).

# NOTE [own loss element]
A ``forward`` that ends ``return rec_loss, rec_scores`` computes its training loss itself: a
scalar (a torch loss with its default reduction, ``torch.sum(x)``, ``x.mean()``, their sums,
differences, products and quotients with numbers, or a method of the class whose every return
is such a scalar). The other elements are what the caller reads besides (CRSLab's GRU4Rec
returns the scores its systems only rank with ``torch.topk``). :func:`beside_own_loss`: every
``return`` of the function is a tuple with such a loss element, and the name asked about is
built into none of the loss elements (through the function's assignments). A value read
without its history there (``self.emb.weight.data``) gives the weight no gradient along a path
the forward's own loss does not take; the loss trains what it reads. Not read: what the caller
does with the other elements (its file is not searched: a caller backpropagating the scores
too is not seen).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.cuts import is_functional_loss, is_torch_loss
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.reach import value_of
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

REDUCTIONS = frozenset({"sum", "mean"})
COUNTS = frozenset({"numel", "size", "len", "float", "int"})  # `loss / pos.numel()`
SCALAR_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div)
MAX_DEPTH = 3


def beside_own_loss(ctx: Context, fn: ast.AST, name: str) -> bool:
    """Whether ``fn`` returns ``name`` only beside its own loss (NOTE [own loss element])."""
    memo: dict = ctx.memo("own-loss-elements", fn, dict)
    if "elements" not in memo:
        memo["elements"] = _loss_elements(ctx, fn)
    elements = memo["elements"]
    if not elements:
        return False
    scope = ctx.scope(fn)
    return all(name not in _deps(scope, e) for e in elements)


def _loss_elements(ctx: Context, fn: ast.AST) -> list[ast.expr]:
    """The loss element of each ``return`` of ``fn`` (empty: some return has none)."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    scope = ctx.scope(fn)
    rets = [s for s in scope.stmts if isinstance(s, ast.Return)]
    out: list[ast.expr] = []
    for r in rets:
        if not isinstance(r.value, ast.Tuple) or len(r.value.elts) < 2:
            return []
        loss = next((e for e in r.value.elts if _is_loss(ctx, scope, e, r.lineno, 0)), None)
        if loss is None:
            return []
        out.append(loss)
    return out


def _deps(scope: Scope, e: ast.expr) -> set[str]:
    """The local names ``e`` is built from, through the function's assignments."""
    todo = [n.id for n in walk(e) if isinstance(n, ast.Name)]
    seen: set[str] = set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        for b in scope.bindings.get(n, ()):
            v = value_of(b)
            if v is not None:
                todo.extend(x.id for x in walk(v) if isinstance(x, ast.Name))
    return seen


def _is_loss(ctx: Context, scope: Scope, e: ast.expr, line: int, depth: int) -> bool:
    """``e`` is a scalar loss computed here (see the NOTE)."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(e, ast.Name):
        bs = [b for b in scope.bindings.get(e.id, ()) if b.line < line]
        return bool(bs) and all(
            (v := value_of(b)) is not None and not isinstance(v, ast.Tuple)
            and _is_loss(ctx, scope, v, b.line, depth + 1) for b in bs)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        return _is_loss(ctx, scope, e.operand, line, depth)
    if isinstance(e, ast.BinOp) and isinstance(e.op, SCALAR_OPS):
        sides = [x for x in (e.left, e.right) if not _number(x)]
        return bool(sides) and all(_is_loss(ctx, scope, x, line, depth) for x in sides)
    if not isinstance(e, ast.Call) or any(
            k.arg == "reduction" and not (isinstance(k.value, ast.Constant)
                                          and k.value.value in ("mean", "sum"))
            for k in e.keywords):
        return False
    f = e.func
    q = ctx.qualified_name(f) or ""
    if is_functional_loss(q) or q in ("torch.sum", "torch.mean") and len(e.args) == 1 \
            and not any(k.arg == "dim" for k in e.keywords):
        return True
    if isinstance(f, ast.Attribute) and f.attr in REDUCTIONS and not e.args \
            and not e.keywords and not q.startswith(("numpy.", "np.")):
        return True  # `((out - y) ** 2).mean()`
    if isinstance(f, ast.Call):  # `nn.MSELoss()(out, y)`
        return is_torch_loss(ctx.qualified_name(f.func))
    k = ctx.analysis.kind(f, scope, line) if isinstance(f, (ast.Name, ast.Attribute)) else None
    if k is not None and k.what == MODULE and is_torch_loss(k.cls):
        return True  # `self.criterion = nn.CrossEntropyLoss()`
    method = ctx.analysis.callee(e, scope.node)
    if method is None or method is scope.node:
        return False
    ms = ctx.scope(method)
    rets = [s for s in ms.stmts if isinstance(s, ast.Return)]
    return bool(rets) and all(r.value is not None and _is_loss(ctx, ms, r.value, r.lineno,
                                                                 depth + 1) for r in rets)


def _number(e: ast.expr) -> bool:
    """A constant number, or a count (``x.numel()``, ``len(batch)``)."""
    if isinstance(e, ast.Call):
        f = e.func
        return (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")) in COUNTS
    return isinstance(e, ast.Constant) and isinstance(e.value, (int, float)) \
        and not isinstance(e.value, bool)
