"""GT302: a local view of a Parameter written in place more than once.

# NOTE [one view, several writes]
``b = self.conv.bias.view(3, -1)``, then ``b[:, 4] += c`` and ``b[:, 5:] += d`` (YOLO's smart
bias initialization): each write raises 'a view of a leaf Variable that requires grad is being
used in an in-place operation', and the one line that mends them all is the one making the view
(``self.conv.bias.detach().view(3, -1)``, sparseml's fix); YOLOv5 mends each write instead
(``b.data[:, 4] += ...``). GT302 is reported at the view's binding, with each write related, and
at the first write (the one that raises); the later writes are listed, not reported again. One
write through the view is reported at the write alone, as any other.
"""
from __future__ import annotations

import ast

from gradtrace.lint.context import Context
from gradtrace.lint.rules.leaf._tensors import VIEW_METHODS
from gradtrace.lint.rules.leaf._writes import in_place_writes, own_statements

_VIEWS = (VIEW_METHODS - {"clone"}) | {"view_as", "narrow", "select", "unflatten"}


def view_writes(fn: ast.AST, stmt: ast.stmt, target: ast.expr, ctx: Context
                ) -> tuple[ast.stmt, list[ast.stmt]] | None:
    """(the statement binding the local view ``target`` writes, every in-place write through
    that binding in ``fn``, in source order) when there are two or more
    (NOTE [one view, several writes]); None otherwise."""
    while isinstance(target, ast.Subscript):
        target = target.value
    if not isinstance(target, ast.Name):
        return None
    scope = ctx.scope(fn)
    b = scope.binding_before(target.id, stmt.lineno)
    v = b.value if b is not None and isinstance(b.stmt, ast.Assign) \
        and len(b.stmt.targets) == 1 else None
    if not (isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute)
            and v.func.attr in _VIEWS and isinstance(v.func.value, ast.Attribute)):
        return None  # `b = <layer>.<parameter>.view(...)`: a view of a Parameter attribute
    writes = []
    for s in own_statements(fn.body):  # type: ignore[attr-defined]
        for t, _ in in_place_writes(s):
            while isinstance(t, ast.Subscript):
                t = t.value
            if isinstance(t, ast.Name) and t.id == target.id \
                    and scope.binding_before(t.id, s.lineno) is b:
                writes.append(s)
                break
    if len(writes) < 2:
        return None
    return b.stmt, sorted(writes, key=lambda s: s.lineno)  # type: ignore[return-value]
