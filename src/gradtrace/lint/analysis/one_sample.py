"""A value of one element because its batch is one sample built here and one entry is picked.

# NOTE [batch of one built here]
``context = torch.tensor(tokens).unsqueeze(0)``, ``logits, past = model(context)``,
``probs = F.softmax(logits[:, -1, :], dim=-1)``, ``nll = -torch.log(probs[:, target])``
(PPLM's ``get_embedding_grad``): the function makes its batch from one sample (``x[None]``,
``x.unsqueeze(0)``, ``torch.tensor([x])``), so every row-wise value has one row, and picking
one column of it leaves one element: ``nll.backward()`` runs, and no other batch can reach
this code. A rank reading (NOTE [ranks]) says "one value per sample"; this says how many
samples there are. Followed through local names, elementwise arithmetic and functions,
``sum`` of a list, softmax/log-softmax, ``x[:, i]`` and ``x[:, -1, :]``.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.reach import value_of

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

ROWWISE = frozenset({"softmax", "log_softmax"})
ELEMENTWISE = frozenset({"log", "exp", "neg", "abs", "sigmoid", "float", "log1p", "clamp"})


def one_element(e: ast.AST, scope: Scope, ctx: Context, line: int, d: int = 0) -> bool:
    """``e`` picks one entry per row of a value whose batch is one sample made here."""
    if d > 12:
        return False
    if isinstance(e, ast.Name):
        bs = scope.bindings_before(e.id, line)
        return bool(bs) and all(v is not None and one_element(v, scope, ctx, b.line, d + 1)
                                for b in bs for v in [value_of(b)])
    if isinstance(e, ast.UnaryOp):
        return one_element(e.operand, scope, ctx, line, d + 1)
    if isinstance(e, ast.BinOp):
        sides = [s for s in (e.left, e.right) if not isinstance(s, ast.Constant)]
        return bool(sides) and all(one_element(s, scope, ctx, line, d + 1) for s in sides)
    if isinstance(e, ast.ListComp):
        return one_element(e.elt, scope, ctx, line, d + 1)
    if isinstance(e, ast.Call):
        f = e.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        if name == "sum" and isinstance(f, ast.Name) and len(e.args) == 1:
            return one_element(e.args[0], scope, ctx, line, d + 1)  # `sum([... for t in ts])`
        if name in ELEMENTWISE:
            recv = e.args[0] if (ctx.qualified_name(f) or "").startswith("torch.") and e.args \
                else getattr(f, "value", None)
            return recv is not None and one_element(recv, scope, ctx, line, d + 1)
        return False
    if isinstance(e, ast.Subscript):
        parts = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
        if len(parts) == 2 and _all(parts[0]) and not isinstance(parts[1], ast.Slice) and (
                not isinstance(parts[1], ast.List) or len(parts[1].elts) == 1):
            return one_row(e.value, scope, ctx, line, d + 1)
    return False


def one_row(e: ast.AST, scope: Scope, ctx: Context, line: int, d: int = 0) -> bool:
    """``e`` has one row: a model's output for a one-sample batch made here, through
    row-wise steps."""
    if d > 12:
        return False
    if isinstance(e, ast.Name):
        bs = scope.bindings_before(e.id, line)
        return bool(bs) and all(v is not None and one_row(v, scope, ctx, b.line, d + 1)
                                for b in bs for v in [value_of(b)])
    if isinstance(e, ast.Subscript):
        parts = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
        return _all(parts[0]) and one_row(e.value, scope, ctx, line, d + 1)
    if not isinstance(e, ast.Call):
        return False
    f = e.func
    name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
    if name in ROWWISE and e.args:
        return one_row(e.args[0], scope, ctx, line, d + 1)
    # a model call (an object, not a torch function) fed a one-sample batch
    return not (ctx.qualified_name(f) or "").startswith("torch.") and bool(e.args) and \
        one_sample(e.args[0], scope, line)


def one_sample(e: ast.AST, scope: Scope, line: int) -> bool:
    """``x.unsqueeze(0)``, ``x[None]``, ``torch.tensor([x])`` (through one local name)."""
    if isinstance(e, ast.Name):
        b = scope.binding_before(e.id, line)
        e = value_of(b) if b is not None else None  # type: ignore[assignment]
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr in ("to", "cuda", "float", "long"):
        e = e.func.value
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr == "unsqueeze" and e.args and isinstance(e.args[0], ast.Constant) \
            and e.args[0].value == 0:
        return True
    if isinstance(e, ast.Subscript) and isinstance(e.slice, ast.Constant) \
            and e.slice.value is None:
        return True
    return isinstance(e, ast.Call) and bool(e.args) and isinstance(e.args[0], ast.List) \
        and len(e.args[0].elts) == 1 and getattr(e.func, "attr", "") == "tensor"


def _all(p: ast.AST) -> bool:
    return isinstance(p, ast.Slice) and p.lower is None and p.upper is None and p.step is None
