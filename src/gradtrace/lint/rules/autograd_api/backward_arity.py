"""GT135: a custom `autograd.Function`'s `backward` takes a different number of incoming
gradients than its `forward` returns outputs."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.autograd_api.functions import (
    _is_function_class, _method, _never_differentiated, _returns, _tuple_items,
    only_called_directly)

# operators a tuple does not support: their result is one value (a tensor), never a tuple
def _outputs(fwd: ast.FunctionDef) -> int | None:
    """The number of outputs every live ``return`` of ``forward`` gives, when they all agree."""
    widths = {None if (items := _tuple_items(r.value, fwd)) is None else len(items)
              for r in _returns(fwd)}
    if len(widths) != 1 or None in widths:
        return None
    return next(iter(widths))  # type: ignore[return-value]


def _grad_params(bwd: ast.FunctionDef) -> tuple[int, int] | None:
    """(required, total) positional parameters of ``backward`` after ``ctx`` (and ``cls``), or
    None for ``*grads`` or a method that is neither static nor a class method."""
    names = {dotted(d) for d in bwd.decorator_list}
    if bwd.args.vararg is not None:
        return None
    pos = [*bwd.args.posonlyargs, *bwd.args.args]
    if "staticmethod" in names:
        skip = 1
    elif "classmethod" in names:
        skip = 2
    else:
        return None
    if len(pos) < skip:
        return None
    total = len(pos) - skip
    return max(total - len(bwd.args.defaults), 0), total


class BackwardGradArgumentsMismatch(Rule):
    """A custom `autograd.Function`'s `backward` takes a different number of incoming
    gradients than its `forward` returns outputs.

    Why: autograd calls `backward(ctx, *grads)` with one gradient per output of `forward`,
    whatever the output: an output marked with `ctx.mark_non_differentiable` gets a zero
    tensor, an output that is not a tensor gets `None`, and none is left out. A `backward(ctx,
    grad_output)` for a `forward` that returns `(out, running_mean, running_var)` raises
    `TypeError: F.backward() takes 2 positional arguments but 4 were given` on the first
    backward; one that takes more gradients than there are outputs raises `missing 1 required
    positional argument` (both checked on torch 2.13). Take one argument per output
    (`backward(ctx, grad_out, grad_mean, grad_var)`), or `*grads`.
    Known limits: counts outputs only when every `return` of `forward` is a tuple literal (or
    a local bound once to one) of the same length, or a value that cannot be a tuple
    (`a - b`, `x / s`); a `backward` taking `*grads` or parameters with defaults that cover
    the difference is trusted; a Function whose outputs are all non-differentiable, or that
    is never applied, is skipped.
    """

    code = "GT135"
    gate_statements = True
    name = "backward-grad-arguments-mismatch"
    message = ("`{cls}.backward` takes {takes} besides ctx, but `forward` returns {outputs}: "
               "autograd passes one gradient per output, so the first backward through "
               "`{cls}` raises `TypeError: {cls}.backward() {error}`")
    triggers = ("Function",)
    examples = [
        Bad("""
            import torch

            class NormWithStats(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    mean = x.mean(0)
                    ctx.mark_non_differentiable(mean)
                    return x - mean, mean

                @staticmethod
                def backward(ctx, grad_out):
                    return grad_out - grad_out.mean(0)
            """, at=(11, 4)),
        Good("""
            import torch

            class NormWithStats(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    mean = x.mean(0)
                    ctx.mark_non_differentiable(mean)
                    return x - mean, mean

                @staticmethod
                def backward(ctx, grad_out, grad_mean):
                    return grad_out - grad_out.mean(0)
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        if not node.bases or not _is_function_class(node, ctx):
            return
        fwd, bwd = _method(node, "forward"), _method(node, "backward")
        if fwd is None or bwd is None or _never_differentiated(fwd):
            return
        params = _grad_params(bwd)
        n = _outputs(fwd)
        if params is None or n is None:
            return
        required, total = params
        if required <= n <= total or only_called_directly(node, ctx):
            return
        if n > total:
            error = (f"takes {total + 1} positional argument{'s' if total else ''} "
                     f"but {n + 1} were given")
        else:
            missing = [a.arg for a in [*bwd.args.posonlyargs, *bwd.args.args][-total:]][n:required]
            error = (f"missing {len(missing)} required positional argument"
                     f"{'s' if len(missing) != 1 else ''}: "
                     + ", ".join(f"'{m}'" for m in missing))
        ret = min(_returns(fwd), key=lambda r: r.lineno)
        yield self.report(
            bwd, ctx, related=(Related(ctx.path, ret.lineno, "`forward` returns its outputs here",
                                       ctx.column(ret)),),
            cls=node.name, takes=_count(required if n < required else total, "gradient"),
            outputs=_count(n, "output"), error=error)


def _count(k: int, word: str) -> str:
    return f"{k} {word}{'s' if k != 1 else ''}"
