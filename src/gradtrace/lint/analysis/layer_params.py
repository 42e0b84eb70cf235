"""Which expressions are a Parameter of a ``torch.nn`` layer, or a view of one.

# NOTE [layer parameter views]
``conv.weight``, ``getattr(self.rnn, f"bias_hh_l{i}")`` and ``model.enc.layer[1].dense.bias``
are Parameters that require grad when the owner's kind (NOTE [kinds]) is a ``torch.nn`` layer
that holds weights (through attribute chains of the file's classes, and elements of a
``ModuleList``/``Sequential`` built of one class). A view of one (``.view(...)``,
``.chunk(4)[1]``, ``[:, pos]``, a name bound once to such a view: ``b = mi.bias.view(3, -1)``)
shares its version counter: an in-place write into it with grad enabled is refused (`a view of
a leaf Variable that requires grad is being used in an in-place operation`). ``.data``,
``.detach()`` and any other call end the reading (None: not known to be one); a layer built
with ``bias=False`` has no bias Parameter.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.grad_values import WEIGHTED
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.nodes import peel

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

MAX_DEPTH = 4
# tensor methods that return a view of their receiver (checked on torch 2.13)
VIEWS = frozenset({
    "view", "view_as", "reshape", "chunk", "split", "narrow", "select", "unbind", "t",
    "transpose", "permute", "unsqueeze", "squeeze", "flatten", "expand", "expand_as",
    "diagonal", "as_strided", "unfold", "movedim", "tensor_split", "split_with_sizes"})


def layer_parameter(ctx: Context, fn: ast.AST, e: ast.AST, line: int,
                    depth: int = 0) -> ast.AST | None:
    """The call building the ``torch.nn`` layer whose Parameter ``e`` (read at ``line`` in
    the function or module ``fn``) is or views; None: not known to be one
    (NOTE [layer parameter views])."""
    e = peel(e, VIEWS)
    if isinstance(e, ast.Name):
        scope = ctx.scope(fn)
        b = scope.binding_before(e.id, line)
        if depth >= MAX_DEPTH or b is None or not isinstance(b.stmt, ast.Assign) \
                or b.value is None or len(scope.bindings.get(e.id, ())) != 1 \
                or len(b.stmt.targets) != 1 or not isinstance(b.stmt.targets[0], ast.Name):
            return None
        return layer_parameter(ctx, fn, b.value, b.line, depth + 1)
    owner, attr = _owner_attr(e)
    if owner is None or not (attr in ("weight", "bias") or attr.startswith(("weight_",
                                                                           "bias_"))):
        return None
    k = ctx.analysis.kind_in(owner, fn, line)
    if k is None or k.what != MODULE or k.cls not in WEIGHTED:
        return None
    if attr.startswith("bias") and isinstance(k.node, ast.Call) and any(
            kw.arg == "bias" and not (isinstance(kw.value, ast.Constant) and kw.value.value)
            for kw in k.node.keywords):
        return None
    return k.node if k.node is not None else owner


def _owner_attr(e: ast.AST) -> tuple[ast.expr | None, str]:
    """(owner, attribute) of ``owner.attr`` or ``getattr(owner, "attr...")`` (an f-string:
    its leading text)."""
    if isinstance(e, ast.Attribute):
        return e.value, e.attr
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "getattr" \
            and len(e.args) == 2:
        a = e.args[1]
        if isinstance(a, ast.JoinedStr) and a.values:
            a = a.values[0]
        if isinstance(a, ast.Constant) and isinstance(a.value, str):
            return e.args[0], a.value
    return None, ""
