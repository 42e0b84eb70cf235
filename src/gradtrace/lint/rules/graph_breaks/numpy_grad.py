"""GT116: a tensor that requires grad handed to NumPy or Matplotlib with grad enabled."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.callees import function_sites
from gradtrace.lint.analysis.kinds import PARAMETER
from gradtrace.lint.analysis.grad_values import callers, passed_param, requires_grad
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.rule import Bad, Good, Rule

# NumPy functions that read a tensor through ``Tensor.__array__`` (``.numpy()``)
NUMPY_READS = frozenset({"numpy." + f for f in (
    "array", "asarray", "asanyarray", "copy", "ascontiguousarray", "save", "savetxt")})
# pyplot functions that convert every positional argument with NumPy
PLOTS = frozenset({"matplotlib.pyplot." + f for f in (
    "plot", "scatter", "imshow", "hist", "bar", "barh", "fill_between", "errorbar",
    "semilogx", "semilogy", "loglog", "step", "stem", "matshow", "pcolormesh", "contour",
    "contourf", "hist2d")})
MAX_HOPS = 2


class NumpyOfTensorRequiringGrad(Rule):
    """`.numpy()`, a NumPy conversion (`np.asarray(t)`) or a pyplot call (`plt.plot(t)`) is
    given a tensor that requires grad, with grad enabled.

    Why: NumPy reads a tensor through `Tensor.numpy()`, which refuses one that requires grad
    while grad is enabled: `RuntimeError: Can't call numpy() on Tensor that requires grad.
    Use tensor.detach().numpy() instead.` (checked on torch 2.13; under `torch.no_grad()` the
    call works). A model's output, a Parameter and what is computed from them require grad
    (PIXIE's visualizer converting the predicted vertices, fastai's `plt.scatter(x[:, 0], x @
    a)` after training `a`). Read `t.detach().cpu().numpy()`. The value is followed through
    its bindings (NOTE [values that require grad]): in the same function, or from the callers
    of the function whose parameter reaches NumPy, two calls up (a classmethod called through
    its class counts).
    Known limits: a file that freezes anything, a value unpacked from a tuple, a loop target
    and a helper's result are not followed; a function is read as run with grad enabled only
    when every call of it the file makes is.
    """

    code = "GT116"
    name = "numpy-of-tensor-requiring-grad"
    message = ("`{call}` reads `{value}`, which requires grad ({why}), through NumPy with grad "
               "enabled: raises `RuntimeError: Can't call numpy() on Tensor that requires "
               "grad`; use `.detach()` first")
    triggers = ("numpy", "asarray", "array", "copy", "save", "plot", "scatter", "imshow",
                "hist", "bar", "errorbar", "step", "stem", "contour", "pcolormesh")
    gate_statements = True
    examples = [
        Bad("""
            import torch
            import torch.nn as nn

            model = nn.Linear(8, 2)
            x = torch.randn(4, 8)
            scores = model(x).softmax(-1)
            print(scores.numpy())
            """, at=(7, 6)),
        Good("""
            import torch
            import torch.nn as nn

            model = nn.Linear(8, 2)
            x = torch.randn(4, 8)
            scores = model(x).softmax(-1)
            print(scores.detach().numpy())
            """),
        Bad("""
            import numpy as np
            import torch
            import torch.nn as nn

            def summarize(batch_out):
                return np.asarray(batch_out[0].cpu()).mean()

            net = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
            out = net(torch.randn(2, 4))
            out.sum().backward()
            print(summarize(out))
            """, at=(6, 11)),
        Good("""
            import numpy as np
            import torch
            import torch.nn as nn

            def summarize(batch_out):
                return np.asarray(batch_out[0].cpu()).mean()

            net = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
            with torch.no_grad():
                out = net(torch.randn(2, 4))
            print(summarize(out))
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        for value in _sinks(node, ctx):
            if isinstance(value, (ast.Name, ast.Attribute)):
                k = ctx.analysis.kind(value)
                if k is not None and k.what == PARAMETER and isinstance(k.node, ast.Call):
                    continue  # GT114's
            found = _origin(ctx, ctx.function or ctx.tree, value, node.lineno, 0)
            if found is not None:
                src, rel = found
                yield self.report(node, ctx, related=rel, call=_short(ctx.source(node)),
                                  value=_short(ctx.source(value)), why=_why(src, ctx))
                return


def _sinks(node: ast.Call, ctx: Context) -> list[ast.expr]:
    """The tensors a call converts with NumPy: the receiver of ``.numpy()`` (without
    ``force=True``), the first argument of a NumPy conversion, the positional arguments of
    a pyplot call."""
    f = node.func
    if isinstance(f, ast.Attribute) and f.attr == "numpy":
        return [f.value] if not node.args and not node.keywords else []
    if not node.args:
        return []
    q = ctx.qualified_name(f) or ""
    if q in NUMPY_READS or q.startswith("numpy.linalg."):
        return [node.args[0]] if not isinstance(node.args[0], ast.Starred) else []
    if q in PLOTS:
        return [a for a in node.args if not isinstance(a, (ast.Starred, ast.Constant))]
    return []


def _origin(ctx: Context, where: ast.AST, value: ast.expr, line: int,
            hops: int) -> tuple[ast.AST, list[Related]] | None:
    """(where the gradient comes from, related notes) when ``value`` read at ``line`` in
    ``where`` surely requires grad there and grad is enabled; followed to the callers."""
    if ctx.scope(where).grad_off_at(_stmt_at(ctx, where, value)) is not None:
        return None
    src = requires_grad(ctx, where, value, line)
    if src is not None:
        if not _runs_with_grad(ctx, where, 0):
            return None
        line = src.lineno  # type: ignore[attr-defined]
        return src, [Related(ctx.path, line, "it requires grad from here", ctx.column(src))]
    if hops >= MAX_HOPS:
        return None
    p = passed_param(ctx, where, value, line)
    if p is None:
        return None
    for call, w, arg in callers(ctx, where, p):
        got = _origin(ctx, w, arg, call.lineno, hops + 1)
        if got is not None:
            return got[0], [*got[1], Related(ctx.path, call.lineno, "passed here",
                                             ctx.column(call))]
    return None


def _short(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


def _stmt_at(ctx: Context, where: ast.AST, e: ast.AST) -> ast.AST:
    s = ctx.scope(where).statement_of(e)
    return s if s is not None else e


def _runs_with_grad(ctx: Context, fn: ast.AST, hops: int) -> bool:
    """The module body, or a function every call of which in the file (one at least) is made
    with grad enabled, two calls up."""
    if fn is ctx.tree:
        return True
    if not isinstance(fn, FUNCTION_TYPES) or hops > MAX_HOPS:
        return False
    sites = function_sites(ctx.analysis, fn)
    return bool(sites) and all(
        w is not fn and ctx.scope(w).grad_off_at(c) is None and _runs_with_grad(ctx, w, hops + 1)
        for c, w in sites)


def _why(src: ast.AST, ctx: Context) -> str:
    what = "a Parameter" if not isinstance(src, ast.Call) or (
        ctx.qualified_name(src.func) or "") == "torch.nn.Parameter" else "a model's output"
    if isinstance(src, ast.Call) and any(k.arg == "requires_grad" for k in src.keywords):
        what = "made with requires_grad=True"
    return f"{what}, line {src.lineno}"  # type: ignore[attr-defined]
