"""Size-one dimensions of a ``forward``'s input, read at the calls of its instances.

# NOTE [caller dims]
The shape reader (NOTE [singleton dims]) knows nothing of a function's parameter. A module's
``forward(self, query, context)`` is given, for ``context``, what every call of an instance of
the class in the file passes (NOTE [instance calls]): when each of those values is shown to
have size 1 at a dimension (``intent.unsqueeze(1)``), so has the parameter. Two more facts
this reader adds: ``torch.bmm``'s operands are 3-D (``bmm(q, k.transpose(1, 2))``: the
transposed ``k``'s dimension 2 is its last), and ``numpy``'s functions of numbers are numbers
(``scores / np.sqrt(d)``). Used to keep a rule silent (GT764), never to report: the plain
reader keeps GT762/GT763 as they were.
"""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.dims import Dims, ShapeReader
from gradtrace.lint.analysis.instance_calls import passed_values
from gradtrace.lint.flow import Scope

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


class CallerShapeReader(ShapeReader):
    """:class:`ShapeReader` that also reads a ``forward`` parameter from its callers."""

    def is_number(self, e: ast.AST, scope: Scope, line: int) -> bool:
        if isinstance(e, ast.Call) and (self.ctx.qualified_name(e.func) or "").startswith(
                "numpy.") and e.args and not e.keywords:
            return all(self.is_number(a, scope, line) for a in e.args)
        return super().is_number(e, scope, line)

    def dims(self, e: ast.AST, scope: Scope, line: int, depth: int = 0) -> Dims | None:
        got = super().dims(e, scope, line, depth)
        fn = scope.node
        if got is not None or not isinstance(e, ast.Name) or not isinstance(fn, _FUNCTIONS) \
                or scope.binding_before(e.id, line) is not None or depth > 4 \
                or e.id not in {a.arg for a in (*fn.args.posonlyargs, *fn.args.args)}:
            return got  # not a parameter read before any rebinding
        found: Dims | None = None
        for value, where in passed_values(self.ctx, fn, e.id) or ():
            d = self.dims(value, self.ctx.scope(where), getattr(value, "lineno", 0), depth + 1)
            if d is None or not d.ones:
                return None
            found = d if found is None else Dims(
                found.rank if found.rank == d.rank else None, min(found.min_rank, d.min_rank),
                found.ones & d.ones)
        return found if found is not None and found.ones else None

    def _torch_function(self, e: ast.Call, name: str, scope: Scope, line: int,
                        depth: int) -> Dims | None:
        if name == "bmm" and len(e.args) == 2:
            left, right = (self.dims(a, scope, line, depth + 1) for a in e.args)
            if right is None or not right.with_rank(3).has_one(-1):
                return None
            return Dims(3, 3, frozenset({-1, 2}))
        return super()._torch_function(e, name, scope, line, depth)


def last_axis_single(x: ast.expr, scope: Scope, line: int, ctx: object) -> bool:
    """Whether ``x`` (read at ``line``) is shown to have size 1 in its last dimension, with
    what callers pass for a ``forward`` parameter (NOTE [caller dims])."""
    got = CallerShapeReader(ctx).dims(x, scope, line)  # type: ignore[arg-type]
    return got is not None and got.has_one(-1)
