"""GT724: a custom `autograd.Function` whose `backward` returns `None` for an input that a call
of `.apply` gives a Parameter of a module.

# NOTE [parameter behind a None gradient]
``backward`` returning ``None`` in an input's position says "no gradient for this input":
autograd gives that input nothing through this call, whatever its ``requires_grad`` (checked on
torch 2.13: a Parameter passed there keeps ``grad`` None and the optimizer never moves it).
That is right for data, sizes, flags and fixed quantization ranges, and a silent bug for a
learned one (torchao PR#2280: range learning made the scales and zero points Parameters while
the fake-quantize Function kept returning None for them). The argument is judged a learned
tensor when it is, through the callers' own parameters two calls up, a Parameter or the output
of a weighted layer (NOTE [values that require grad]), or a ``self.<attr>`` its class assigns an
``nn.Parameter(...)`` that does not ask ``requires_grad=False``; the file must train
(a ``.backward(`` call or a ``torch.optim`` optimizer): an inference container's scales kept as
default Parameters (transformers' ``EetqLinear``) are never trained. The ``.apply`` call is
reported: the gradient it drops is decided there (pass a value the Function differentiates,
or write the op without a Function).
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.grad_values import (
    passed_param, passed_requiring, requires_grad, runs_with_grad)
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.autograd_api.functions import (
    _is_function_class, _method, _returns, _tuple_items)
from gradtrace.lint.rules.leaf._tensors import is_false, is_parameter_call, keyword


def _none_positions(cls: ast.ClassDef) -> tuple[ast.FunctionDef, set[int]] | None:
    """(forward, the input positions every ``return`` of ``backward`` gives ``None``)."""
    fwd, bwd = _method(cls, "forward"), _method(cls, "backward")
    if fwd is None or bwd is None or fwd.args.vararg is not None:
        return None
    out: set[int] | None = None
    for r in _returns(bwd):
        items = _tuple_items(r.value, bwd)
        if items is None:
            return None
        here = {i for i, x in enumerate(items) if isinstance(x, ast.Constant) and x.value is None}
        out = here if out is None else out & here
    return (fwd, out) if out else None


def _class_parameter(cls: ast.ClassDef | None, e: ast.AST, ctx: Context) -> ast.Call | None:
    """The ``nn.Parameter(...)`` (not asking ``requires_grad=False``) the class ``cls`` assigns
    to ``e``, a ``self.<attr>``."""
    name = dotted(e)
    if name is None or not name.startswith("self.") or name.count(".") != 1 or cls is None:
        return None
    for n in ast.walk(cls):
        if isinstance(n, ast.Assign) and any(dotted(t) == name for t in n.targets) \
                and is_parameter_call(n.value, ctx) and not is_false(keyword(
                    n.value, "requires_grad")):
            return n.value  # type: ignore[return-value]
    return None


class FunctionDropsParameterGradient(Rule):
    """A custom `autograd.Function`'s `backward` returns `None` for an input, and `.apply` is
    given a learned Parameter there: `return grad * mask, None, None` for
    `Quant.apply(w, self.scale, self.zero_point)` with `self.scale = nn.Parameter(...)`.

    Why: `None` in an input's position means "no gradient": autograd gives that input nothing
    through the call, whatever its `requires_grad`. A Parameter reached only through it keeps
    `grad` None and the optimizer never moves it (torchao's QAT range learning: the scales and
    zero points stayed at their initial values, PR#2280; checked on torch 2.13). Return the
    gradient for that input, or build the op from differentiable pieces with a
    straight-through term (`x + (round(x) - x).detach()`) instead of a Function
    (NOTE [parameter behind a None gradient]).
    Known limits: the None must be a literal in every tuple `backward` returns; the argument
    must be a Parameter or a weighted layer's output where `.apply` is called or in a caller
    (two calls up), or a `self.<attr>` the module class makes an `nn.Parameter`; a Parameter
    that also reaches the loss another way is still reported (this path drops its share); the
    file must train (call `.backward(` or build an optimizer): a module of an inference-only
    file (a quantized layer's scales kept as default Parameters) is left alone.
    """

    code = "GT724"
    needs_step = True  # NOTE [step files]
    name = "function-drops-parameter-gradient"
    message = ("`{cls}.backward` returns None for input {pos} (`{param}`), and this call gives "
               "it `{arg}`, a learned tensor ({why}): it gets no gradient through `{cls}` and "
               "does not train; return its gradient from `backward`")
    triggers = ("apply(",)
    gate_statements = True
    examples = [
        Bad("""
            import torch
            from torch import nn

            class FakeQuant(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, scale):
                    return torch.round(x / scale).clamp(-8, 7) * scale

                @staticmethod
                def backward(ctx, g):
                    return g, None

            class QLinear(nn.Linear):
                def __init__(self, n, m):
                    super().__init__(n, m)
                    self.scale = nn.Parameter(torch.full((m, 1), 0.1))

                def forward(self, x):
                    return nn.functional.linear(x, FakeQuant.apply(self.weight, self.scale))

            opt = torch.optim.SGD(QLinear(4, 2).parameters(), lr=0.1)
            """, at=(19, 39)),
        Good("""
            import torch
            from torch import nn

            class FakeQuant(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, scale):
                    return torch.round(x / scale).clamp(-8, 7) * scale

                @staticmethod
                def backward(ctx, g):
                    return g, None

            class QLinear(nn.Linear):
                def __init__(self, n, m):
                    super().__init__(n, m)
                    self.register_buffer("scale", torch.full((m, 1), 0.1))

                def forward(self, x):
                    return nn.functional.linear(x, FakeQuant.apply(self.weight, self.scale))

            opt = torch.optim.SGD(QLinear(4, 2).parameters(), lr=0.1)
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if not (isinstance(f, ast.Attribute) and f.attr == "apply"
                and isinstance(f.value, ast.Name)) or node.keywords \
                or any(isinstance(a, ast.Starred) for a in node.args):
            return
        info = ctx.analysis.classes.get(f.value.id)
        if info is None or not _is_function_class(info.node, ctx):
            return
        got = ctx.memo("gt724-none", info.node, lambda: _none_positions(info.node))
        if got is None or ctx.grad_disabled is not None or not ctx.mentions(
                ".backward(", "optim."):
            return  # a file that trains nothing: an inference container's quantized weights
        fwd, nones = got
        params = [a.arg for a in (*fwd.args.posonlyargs, *fwd.args.args)][1:]  # after ctx
        for i in sorted(nones):
            if i >= len(node.args) or i >= len(params):
                continue
            why = self._learned(node.args[i], node, ctx)
            if why is not None:
                src, text = why
                yield self.report(node, ctx, related=(Related(
                    ctx.path, getattr(src, "lineno", node.lineno), text,
                    ctx.column(src)),), cls=f.value.id, pos=i, param=params[i],
                    arg=ctx.source(node.args[i])[:40], why=text)
                return

    @staticmethod
    def _learned(arg: ast.expr, node: ast.Call, ctx: Context
                 ) -> tuple[ast.AST, str] | None:
        """(where the argument's gradient would come from, a few words) when it is learned."""
        where = ctx.function or ctx.tree
        made = _class_parameter(ctx.class_def, arg, ctx)
        if made is not None:
            return made, f"`{ctx.source(arg)}` is made an `nn.Parameter` here"
        src = requires_grad(ctx, where, arg, node.lineno)
        if src is not None and runs_with_grad(ctx, where):
            return src, "it requires grad from here"
        p = passed_param(ctx, where, arg, node.lineno) if isinstance(
            where, FUNCTION_TYPES) else None
        if p is None:
            return None
        got = passed_requiring(ctx, where, p)
        if got is not None:
            return got[0], "a caller passes a tensor that requires grad from here"
        for call, w in _caller_sites(ctx, where):
            a = ctx.analysis.arguments(where, call).get(p)  # type: ignore[arg-type]
            cls = ctx.analysis.class_of(w)
            made = _class_parameter(cls.node, a, ctx) if a is not None and cls is not None \
                else None
            if made is not None:
                return made, f"a caller passes `{dotted(a)}`, made an `nn.Parameter` here"
        return None


def _caller_sites(ctx: Context, fn: ast.AST) -> list[tuple[ast.Call, ast.AST]]:
    from gradtrace.lint.analysis.callees import function_sites
    return list(function_sites(ctx.analysis, fn) or ())  # type: ignore[arg-type]
