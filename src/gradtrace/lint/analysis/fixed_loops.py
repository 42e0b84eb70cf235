"""Whether a loop runs over a collection written out element by element in the code.

# NOTE [hand-written collections]
A loop that keeps something per pass (graphs appended to a list: GT505) costs memory in
proportion to its passes; "memory grows until out-of-memory" needs passes without a bound in
the code. :func:`over_written_list` finds the loops whose passes are bounded by the code itself:
the iterable (through ``enumerate``/``tqdm``/``iter``) is

- a call of a function (of the file, or of another file of the project: NOTE [project index])
  whose every ``return`` gives a list, tuple or set display, not a comprehension: a fixed set
  of samples a function hands out (``get_testing_complex_list()`` returning ``[house(),
  kite(), ...]``), or a name bound in the function only to such calls;
- torch's ``DataLoader`` (or a class deriving from it, of the file or the project) over one of
  those: it yields at most as many batches as the collection has elements.

A comprehension (``[make() for _ in range(n)]``), a dataset object, ``range(n)``, a generator
or ``itertools.cycle`` is not such a collection: their length is a value of the program. Nor
is a display written beside the loop (``loader = [x1, x2]``): that is how a minimal example
or a reduction stands for a data source of any size (the twins of the unit tests, the cases of
tests/realworld), and the finding is about that source.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.project import foreign_def

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

DISPLAYS = (ast.List, ast.Tuple, ast.Set)
PASS_THROUGH = frozenset({"enumerate", "tqdm", "tqdm.tqdm", "iter"})
LOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})


def over_written_list(ctx: Context, scope: Scope, it: ast.expr, line: int) -> bool:
    """The loop iterable ``it`` (read at ``line``) yields at most as many items as a
    hand-written collection has (NOTE [hand-written collections])."""
    while isinstance(it, ast.Call) and len(it.args) >= 1 and _dotted(it.func) in PASS_THROUGH:
        it = it.args[0]
    return _written(ctx, scope, it, line, loader=True, depth=0)


def _written(ctx: Context, scope: Scope, e: ast.expr, line: int, loader: bool,
             depth: int) -> bool:
    if depth > 4:
        return False
    if isinstance(e, DISPLAYS):
        return False  # written beside the loop: a stand-in for data (see the note)
    if isinstance(e, ast.Name):
        bs = [b for b in scope.bindings.get(e.id, ()) if b.line <= line]
        return bool(bs) and all(
            isinstance(b.stmt, (ast.Assign, ast.AnnAssign)) and b.value is not None
            and _written(ctx, scope, b.value, b.line, loader, depth + 1) for b in bs)
    if not isinstance(e, ast.Call):
        return False
    if loader and e.args and _loader_class(ctx, e.func):
        return _written(ctx, scope, e.args[0], line, False, depth + 1)
    fn = _function(ctx, e.func)
    if fn is None:
        return False
    rets = [r for r in ast.walk(fn) if isinstance(r, (ast.Return, ast.Yield, ast.YieldFrom))]
    return bool(rets) and all(isinstance(r, ast.Return) and isinstance(r.value, DISPLAYS)
                              and not any(isinstance(x, ast.Starred) for x in r.value.elts)
                              for r in rets)


def _function(ctx: Context, func: ast.expr) -> ast.AST | None:
    """The function of the file (a plain name) or of another file of the project."""
    if isinstance(func, ast.Name):
        own = ctx.analysis.functions.get(func.id)
        if own is not None:
            return own
    got = foreign_def(ctx, func)
    if got is not None and isinstance(got[1], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return got[1]
    return None


def _loader_class(ctx: Context, func: ast.expr) -> bool:
    """``func`` is torch's ``DataLoader``, or a class deriving from it directly (of the file
    or of another file of the project)."""
    q = ctx.qualified_name(func) or ""
    if q in LOADERS:
        return True
    if isinstance(func, ast.Name) and func.id in ctx.analysis.classes:
        octx, node = ctx, ctx.analysis.classes[func.id].node
    else:
        got = foreign_def(ctx, func)
        if got is None or not isinstance(got[1], ast.ClassDef):
            return False
        octx, node = got
    return any(octx.qualified_name(b) in LOADERS for b in node.bases)


def _dotted(e: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(e, ast.Attribute):
        parts.append(e.attr)
        e = e.value
    if not isinstance(e, ast.Name):
        return None
    return ".".join([e.id, *reversed(parts)])


def runs_once(loop: ast.stmt) -> bool:
    """``for _ in range(1):`` (or ``range(0, 1)``): a loop of exactly one pass, a block kept
    in a loop's shape (a GAN's ``for i in range(1):`` around each player's update, the count
    left as a setting to raise): what it backwards is backwarded once per run of it."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)) or not isinstance(loop.iter, ast.Call) \
            or _dotted(loop.iter.func) != "range" or loop.iter.keywords:
        return False
    args = loop.iter.args
    if not all(isinstance(a, ast.Constant) and type(a.value) is int for a in args):
        return False
    bounds = [a.value for a in args]  # type: ignore[attr-defined]
    return len(bounds) == 1 and bounds[0] == 1 or len(bounds) == 2 and \
        bounds[1] - bounds[0] == 1
