"""GT116: a tensor that requires grad handed to NumPy or Matplotlib with grad enabled."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.kinds import PARAMETER
from gradtrace.lint.analysis.grad_values import (
    is_parameter, passed_param, passed_requiring, requires_grad, runs_with_grad,
)
from gradtrace.lint.analysis.marked_grad import marked_before, passed_marked, peeled_path
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.excerpt import excerpt

# NumPy functions that read a tensor through ``Tensor.__array__`` (``.numpy()``)
NUMPY_READS = frozenset({"numpy." + f for f in (
    "array", "asarray", "asanyarray", "ascontiguousarray")})
# NumPy ufuncs (and ufunc-backed functions) that convert every tensor operand with
# ``Tensor.__array__`` (``np.log(t)``: checked on torch 2.13 and NumPy 2.4, each raises on a
# tensor that requires grad, and returns a tensor for one that does not)
UFUNCS = frozenset({"numpy." + f for f in (
    "log", "exp", "sqrt", "log1p", "expm1", "log2", "log10", "exp2", "abs", "absolute",
    "square", "sin", "cos", "tan", "tanh", "sinh", "cosh", "arctan", "arcsin", "arccos",
    "sign", "floor", "ceil", "rint", "negative", "reciprocal", "clip", "maximum", "minimum",
    "power", "dot", "matmul", "outer")})
# pyplot functions that convert every positional argument with NumPy
PLOTS = frozenset({"matplotlib.pyplot." + f for f in (
    "plot", "scatter", "imshow", "hist", "hist2d", "matshow")})
LITERALS = (ast.Constant, ast.Dict, ast.List, ast.Tuple, ast.Set, ast.JoinedStr)
LAST_WORDS = frozenset(q.rpartition(".")[2] for q in NUMPY_READS | PLOTS | UFUNCS)


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
    its class counts; a module class's `forward` is called by its instances' calls), and a
    tensor marked with `requires_grad_()` earlier in the function, or by a caller before it
    hands the tensor (or an object holding it) in (NOTE [marked by the caller]).
    Known limits: a file that freezes anything, a value unpacked from a tuple, a loop target
    and a helper's result are not followed; a function is read as run with grad enabled only
    when every call of it the file makes is, up to the module's own code (a file that only
    defines functions and classes is left alone).
    """

    code = "GT116"
    name = "numpy-of-tensor-requiring-grad"
    message = ("`{call}` reads `{value}`, which requires grad ({why}), through NumPy with grad "
               "enabled: raises `RuntimeError: Can't call numpy() on Tensor that requires "
               "grad`; use `.detach()` first")
    triggers = ("numpy", "array", "linalg", "plot", "scatter", "imshow", "hist", "matshow")
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
        sinks = _sinks(node, ctx)
        if not sinks or not ctx.memo("gt116-runs", ctx.tree, lambda: _file_runs(ctx)):
            return
        for value in sinks:
            found = _origin(ctx, ctx.function or ctx.tree, value, node.lineno)
            if found is not None and not _gt114(value, ctx):
                src, rel = found
                yield self.report(node, ctx, related=rel, call=excerpt(ctx.source(node)),
                                  value=excerpt(ctx.source(value)), why=_why(src, ctx))
                return


def _sinks(node: ast.Call, ctx: Context) -> list[ast.expr]:
    """The tensors a call converts with NumPy: the receiver of ``.numpy()`` (without
    ``force=True``), the first argument of a NumPy conversion, the positional arguments of
    a pyplot call."""
    f = node.func
    if isinstance(f, ast.Attribute) and f.attr == "numpy":
        return [f.value] if not node.args and not node.keywords else []
    last = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
    if not node.args or last not in LAST_WORDS and not (
            isinstance(f, ast.Attribute) and isinstance(f.value, ast.Attribute)
            and f.value.attr == "linalg"):
        return []
    q = ctx.qualified_name(f) or ""
    if q in NUMPY_READS or q.startswith("numpy.linalg."):
        return [node.args[0]] if not isinstance(node.args[0], ast.Starred) else []
    if q in PLOTS:
        return [a for a in node.args if not isinstance(a, (ast.Starred, ast.Constant))]
    if q in UFUNCS:  # `np.log(2 * np.pi * var)`: each tensor operand is converted
        return [o for a in node.args if not isinstance(a, ast.Starred) for o in _operands(a)]
    return []


def _operands(e: ast.expr) -> list[ast.expr]:
    """The non-constant operands of an arithmetic expression (``2 * np.pi * var`` ->
    ``np.pi``, ``var``), or the expression itself."""
    if isinstance(e, ast.BinOp):
        return _operands(e.left) + _operands(e.right)
    if isinstance(e, ast.UnaryOp):
        return _operands(e.operand)
    return [] if isinstance(e, ast.Constant) else [e]


def _origin(ctx: Context, where: ast.AST, value: ast.expr, line: int
            ) -> tuple[ast.AST, list[Related]] | None:
    """(where the gradient comes from, related notes) when ``value`` read at ``line`` in
    ``where`` surely requires grad there and grad is enabled; followed to the callers. The
    cheap questions first: whether the file runs ``where`` with grad enabled, whether the
    value starts from one of its parameters."""
    local = runs_with_grad(ctx, where)
    root = _root(value)
    if not local and not (root is not None and is_parameter(where, root)):
        return None
    s = ctx.scope(where).statement_of(value)
    if ctx.scope(where).grad_off_at(s if s is not None else value) is not None:
        return None
    src = requires_grad(ctx, where, value, line) if local else None
    if src is None and local:  # NOTE [marked by the caller], in the function itself
        d = peeled_path(value)
        src = marked_before(ctx, where, d, line) if d is not None else None
    calls: list[ast.Call] = []
    if src is None:
        p = passed_param(ctx, where, value, line)
        got = passed_requiring(ctx, where, p) if p is not None else None
        got = got or passed_marked(ctx, where, value)  # NOTE [marked by the caller]
        if got is None:
            return None
        src, calls = got
    line = src.lineno  # type: ignore[attr-defined]
    return src, [Related(ctx.path, line, "it requires grad from here", ctx.column(src)),
                 *(Related(ctx.path, c.lineno, "passed here", ctx.column(c)) for c in calls)]


def _file_runs(ctx: Context) -> bool:
    """The module body (outside defs and classes) calls something the file defines or binds:
    a finding needs a chain of calls from there (:func:`runs_with_grad`), so a library file
    that only defines things (and literal tables) is left at once."""
    own: set[str] = set()
    runs: list[ast.AST] = []
    todo: list[ast.stmt] = list(ctx.tree.body)
    while todo:
        st = todo.pop()
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(st.name)
        elif isinstance(st, (ast.Import, ast.ImportFrom)):
            continue
        elif isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr)):
            for t in getattr(st, "targets", ()) or [getattr(st, "target", None)]:
                if isinstance(t, ast.Name):
                    own.add(t.id)
            if st.value is not None and not isinstance(st.value, LITERALS):
                runs.append(st.value)
        else:
            for f in ("body", "orelse", "finalbody"):
                todo.extend(getattr(st, f, ()))
            for h in getattr(st, "handlers", ()):
                todo.extend(h.body)
            runs.extend(getattr(st, k) for k in ("test", "iter") if hasattr(st, k))
            runs.extend(i.context_expr for i in getattr(st, "items", ()))
    return any(isinstance(n, ast.Call) and _root(n.func) in own
               for r in runs for n in ast.walk(r))


def _gt114(value: ast.expr, ctx: Context) -> bool:
    """A Parameter of the file read straight: GT114 reports it."""
    if not isinstance(value, (ast.Name, ast.Attribute)):
        return False
    k = ctx.analysis.kind(value)
    return k is not None and k.what == PARAMETER and isinstance(k.node, ast.Call)


def _root(e: ast.AST) -> str | None:
    """The name an expression starts from (``opdict['v'][0].cpu()`` -> ``opdict``)."""
    while isinstance(e, (ast.Subscript, ast.Attribute, ast.Call)):
        e = e.func if isinstance(e, ast.Call) else e.value
    return e.id if isinstance(e, ast.Name) else None


def _why(src: ast.AST, ctx: Context) -> str:
    what = "a Parameter" if not isinstance(src, ast.Call) or (
        ctx.qualified_name(src.func) or "") == "torch.nn.Parameter" else "a model's output"
    if isinstance(src, ast.Call) and any(k.arg == "requires_grad" for k in src.keywords):
        what = "made with requires_grad=True"
    if isinstance(src, (ast.Expr, ast.Assign)):  # NOTE [marked by the caller]
        what = "marked as requiring grad"
    return f"{what}, line {src.lineno}"  # type: ignore[attr-defined]
