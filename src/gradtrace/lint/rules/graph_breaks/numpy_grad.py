"""GT116: a tensor that requires grad handed to NumPy or Matplotlib with grad enabled."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.kinds import PARAMETER
from gradtrace.lint.analysis.grad_values import (
    passed_param, passed_requiring, requires_grad, runs_with_grad,
)
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule

# NumPy functions that read a tensor through ``Tensor.__array__`` (``.numpy()``)
NUMPY_READS = frozenset({"numpy." + f for f in (
    "array", "asarray", "asanyarray", "copy", "ascontiguousarray", "save", "savetxt")})
# pyplot functions that convert every positional argument with NumPy
PLOTS = frozenset({"matplotlib.pyplot." + f for f in (
    "plot", "scatter", "imshow", "hist", "bar", "barh", "fill_between", "errorbar",
    "semilogx", "semilogy", "loglog", "step", "stem", "matshow", "pcolormesh", "contour",
    "contourf", "hist2d")})


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
            found = _origin(ctx, ctx.function or ctx.tree, value, node.lineno)
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


def _origin(ctx: Context, where: ast.AST, value: ast.expr, line: int
            ) -> tuple[ast.AST, list[Related]] | None:
    """(where the gradient comes from, related notes) when ``value`` read at ``line`` in
    ``where`` surely requires grad there and grad is enabled; followed to the callers."""
    s = ctx.scope(where).statement_of(value)
    if ctx.scope(where).grad_off_at(s if s is not None else value) is not None:
        return None
    src = requires_grad(ctx, where, value, line)
    calls: list[ast.Call] = []
    if src is not None:
        if not runs_with_grad(ctx, where):
            return None
    else:
        p = passed_param(ctx, where, value, line)
        got = passed_requiring(ctx, where, p) if p is not None else None
        if got is None:
            return None
        src, calls = got
    line = src.lineno  # type: ignore[attr-defined]
    return src, [Related(ctx.path, line, "it requires grad from here", ctx.column(src)),
                 *(Related(ctx.path, c.lineno, "passed here", ctx.column(c)) for c in calls)]


def _short(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


def _why(src: ast.AST, ctx: Context) -> str:
    what = "a Parameter" if not isinstance(src, ast.Call) or (
        ctx.qualified_name(src.func) or "") == "torch.nn.Parameter" else "a model's output"
    if isinstance(src, ast.Call) and any(k.arg == "requires_grad" for k in src.keywords):
        what = "made with requires_grad=True"
    return f"{what}, line {src.lineno}"  # type: ignore[attr-defined]
