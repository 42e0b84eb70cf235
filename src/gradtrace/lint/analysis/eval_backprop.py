"""A module's eval-mode branch that a backward runs through.

# NOTE [eval instance backpropagated]
``if not self.training:`` in ``forward`` is the inference arm: most code runs it under
``no_grad``, so the rules that need a graph leave it alone. An instance the file puts in eval
mode (``Model().eval()``, ``model.eval()``, ``.train(False)``) and never back in train mode
runs that arm on every call; when a function of the file calls that instance with grad
enabled and then runs ``backward()`` (an adversarial attack on the input of a frozen
detector: yolov7's ``Detect`` decode writing into its sigmoid output), the arm's graph is
backpropagated like any other. :func:`eval_backward` answers, for a module class of the file
(the instance's own class, or a class held as a submodule attribute of it, a few levels
down), that ``backward()`` call. Instances are told apart by their constructing call (the
analysis' kind node, NOTE [kinds]); an instance whose kind is not known does not count.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.grad_values import runs_with_grad
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.nodes import function_scopes, scope_nodes

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

MAX_DEPTH = 3


def eval_backward(ctx: Context, cls: str) -> ast.Call | None:
    """The ``backward()`` after a grad-enabled call of an eval-only instance whose class is
    ``cls`` or holds it (NOTE [eval instance backpropagated]); None: no such run."""
    if not ctx.mentions(".eval(", ".train(") or not ctx.mentions(".backward("):
        return None
    runs: dict[str, ast.Call] = ctx.memo("eval-backward", ctx.tree, lambda: _runs(ctx))
    return next((b for c, b in runs.items() if cls in _held(ctx, c, 0)), None)


def _switches(ctx: Context) -> dict[int, str | None]:
    """id(constructing call) -> class for the instances put in eval mode only (None: an
    instance also put in train mode)."""
    out: dict[int, str | None] = {}
    for fn in function_scopes(ctx.tree):
        for n in scope_nodes(fn):
            if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and n.func.attr in ("eval", "train") and not n.keywords):
                continue
            off = n.func.attr == "eval" and not n.args or n.func.attr == "train" \
                and len(n.args) == 1 and isinstance(n.args[0], ast.Constant) \
                and n.args[0].value is False
            if n.func.attr == "eval" and n.args:
                continue
            k = ctx.analysis.kind_in(n.func.value, fn, n.lineno)
            if k is None or k.what != MODULE or k.node is None:
                continue
            key = id(k.node)
            out[key] = k.cls if off and out.get(key, k.cls) is not None else None
    return out


def _runs(ctx: Context) -> dict[str, ast.Call]:
    """class of an eval-only instance -> the ``backward()`` following a grad-enabled call."""
    evals = {k: c for k, c in _switches(ctx).items() if c is not None}
    out: dict[str, ast.Call] = {}
    if not evals:
        return out
    for fn in function_scopes(ctx.tree):
        nodes = list(scope_nodes(fn))
        backs = sorted((n for n in nodes if isinstance(n, ast.Call)
                        and isinstance(n.func, ast.Attribute) and n.func.attr == "backward"),
                       key=lambda b: (b.end_lineno, b.end_col_offset))
        if not backs or not runs_with_grad(ctx, fn):
            continue
        scope = ctx.scope(fn)
        for n in nodes:
            if not isinstance(n, ast.Call) or not isinstance(n.func, (ast.Name, ast.Attribute)):
                continue
            end = (n.end_lineno, n.end_col_offset)  # `model(x).max().backward()` too
            after = next((b for b in backs if (b.end_lineno, b.end_col_offset) > end), None)
            if after is None:
                continue
            k = ctx.analysis.kind_in(n.func, fn, n.lineno)
            if k is None or k.what != MODULE or id(k.node) not in evals:
                continue
            stmt = scope.statement_of(n)
            if stmt is not None and scope.grad_off_at(stmt) is None:
                out.setdefault(evals[id(k.node)], after)  # type: ignore[index]
    return out


def _held(ctx: Context, cls: str, depth: int) -> set[str]:
    """``cls`` and the file's module classes its attributes hold, ``MAX_DEPTH`` levels down."""
    out = {cls}
    info = ctx.analysis.classes.get(cls)
    if info is None or depth >= MAX_DEPTH:
        return out
    for name in info.attrs:
        k = info.attr_kind(name)
        if k is not None and k.what == MODULE and k.cls and k.cls not in out:
            out |= _held(ctx, k.cls, depth + 1)
    return out
