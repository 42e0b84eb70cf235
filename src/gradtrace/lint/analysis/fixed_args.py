"""A parameter every call of its function gives one constant.

# NOTE [argument fixed by every caller]
``def train_model(self, loader, mode='train')`` tests ``if mode == 'train':`` around its
backward and step, as if it served the evaluation phase too; when every call of it in the
project (this file's calls, and every ``x.train_model(...)`` of the other files, by
NOTE [reverse index]; one at least) passes the same constant for ``mode``, or leaves the default that is that
constant, the parameter takes one value and the test one arm (OpenDialog's agents, called
only with ``mode='train'``). Unknown (not fixed): a call that passes a name, an expression,
``*args`` or ``**kwargs``, a function also used without a call, a project that cannot be
read."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

_MISSING = object()


def fixed_by_callers(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef,
                     name: str) -> bool:
    """Whether every call of ``fn`` in the project gives ``name`` one and the same constant."""
    from gradtrace.lint.analysis.callees import function_sites
    from gradtrace.lint.analysis.callers import foreign_sites
    own = function_sites(ctx.analysis, fn)
    other = foreign_sites(ctx, fn) if own is not None else None
    if other is None or not own and not other:
        return False
    default = _default(fn, name)
    values = set()
    for call in [c for c, _ in own] + [s.call for s in other]:
        if any(isinstance(a, ast.Starred) for a in call.args) or any(
                k.arg is None for k in call.keywords):
            return False
        v = ctx.analysis.arguments(fn, call).get(name)
        v = default if v is None else v.value if isinstance(v, ast.Constant) else _MISSING
        if v is _MISSING:
            return False
        values.add(repr(v))
    return len(values) == 1


def _default(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> object:
    """The constant default of the parameter ``name`` (``_MISSING``: none, or not a constant)."""
    a = fn.args
    pos = [*a.posonlyargs, *a.args]
    pairs = list(zip(pos[len(pos) - len(a.defaults):], a.defaults)) + [
        (x, d) for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
    for x, d in pairs:
        if x.arg == name:
            return d.value if isinstance(d, ast.Constant) else _MISSING
    return _MISSING
