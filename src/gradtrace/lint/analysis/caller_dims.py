"""Size-one dimensions of a ``forward``'s input, read at the calls of its instances.

# NOTE [caller dims]
The shape reader (NOTE [singleton dims]) knows nothing of a function's parameter. A module's
``forward(self, query, context)`` is given, for ``context``, what every call of an instance of
the class in the file passes (NOTE [instance calls]): when each of those values is shown to
have size 1 at a dimension (``intent.unsqueeze(1)``), so has the parameter. Two more facts
this reader adds: ``torch.bmm``'s operands are 3-D (``bmm(q, k.transpose(1, 2))``: the
transposed ``k``'s dimension 2 is its last), a softmax over a literal dimension ``d`` shows a
rank of at least ``d + 1``, and ``numpy``'s functions of numbers or of values not known as
tensors are numbers (``scores / np.sqrt(self.d)``). Used to keep a rule silent (GT764), never to report: the plain
reader keeps GT762/GT763 as they were.
"""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.dims import Dims, ShapeReader, arg, int_value
from gradtrace.lint.analysis.instance_calls import passed_values
from gradtrace.lint.flow import Scope

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


class CallerShapeReader(ShapeReader):
    """:class:`ShapeReader` that also reads a ``forward`` parameter from its callers."""

    def is_number(self, e: ast.AST, scope: Scope, line: int) -> bool:
        if isinstance(e, ast.Call) and (self.ctx.qualified_name(e.func) or "").startswith(
                "numpy.") and e.args and not e.keywords:  # `np.sqrt(self.d)`: no tensor
            return all(self.is_number(a, scope, line) or isinstance(a, (ast.Name, ast.Attribute))
                       and self.ctx.analysis.kind(a, scope, line) is None for a in e.args)
        return super().is_number(e, scope, line)

    def __init__(self, ctx: object) -> None:
        super().__init__(ctx)  # type: ignore[arg-type]
        self._asking: set[tuple[int, str]] = set()  # parameters being read at their callers

    def dims(self, e: ast.AST, scope: Scope, line: int, depth: int = 0) -> Dims | None:
        got = super().dims(e, scope, line, depth)
        fn = scope.node
        if got is not None or not isinstance(e, ast.Name) or not isinstance(fn, _FUNCTIONS) \
                or scope.binding_before(e.id, line) is not None or (id(fn), e.id) in self._asking \
                or e.id not in {a.arg for a in (*fn.args.posonlyargs, *fn.args.args)}:
            return got  # not a parameter read before any rebinding
        self._asking.add((id(fn), e.id))
        try:  # each call site read afresh (its own depth), a parameter once on the way
            return self._passed(fn, e.id)
        finally:
            self._asking.discard((id(fn), e.id))

    def _passed(self, fn: ast.AST, name: str) -> Dims | None:
        found: Dims | None = None
        for value, where in passed_values(self.ctx, fn, name) or ():  # type: ignore[arg-type]
            d = self.dims(value, self.ctx.scope(where), getattr(value, "lineno", 0))
            if d is None or not d.ones:
                return None
            found = d if found is None else Dims(
                found.rank if found.rank == d.rank else None, min(found.min_rank, d.min_rank),
                found.ones & d.ones)
        return found if found is not None and found.ones else None

    def _torch_function(self, e: ast.Call, name: str, scope: Scope, line: int,
                        depth: int) -> Dims | None:
        d = int_value(arg(e, 1, "dim")) if name in ("softmax", "log_softmax") else None
        if d is not None and e.args:  # a literal dim shows the rank is at least d + 1
            got = super()._torch_function(e, name, scope, line, depth) or Dims()
            return Dims(got.rank, max(got.min_rank, d + 1 if d >= 0 else -d), got.ones)
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
