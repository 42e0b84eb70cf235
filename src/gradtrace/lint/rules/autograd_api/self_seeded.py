"""GT795, GT796: a gradient rule written where autograd never reads it (a Module's
`backward` method), and a `backward` whose gradient is the value it differentiates."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.analysis.hand_backwards import called_elsewhere, mirrors_forward
from gradtrace.lint.analysis.modules import AUTOGRAD_FUNCTION_BASES, NOT_MODULES
from gradtrace.lint.analysis.ranks import ONE, SCALAR, rank
from gradtrace.lint.analysis.steps import step_calls
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.autograd_api.functions import _returns
from gradtrace.lint.nodes import walk


def _plain_module_class(node: ast.ClassDef, ctx: Context, depth: int = 0) -> bool:
    """Every base is a ``torch.nn`` layer class or, through the file's classes, one: no base
    from another library (a LightningModule, a DeepSpeed engine) whose own machinery may call
    a ``backward`` method."""
    if not node.bases or depth > 4:
        return False
    classes = ctx.analysis.classes
    for b in node.bases:
        q = ctx.qualified_name(b) or ""
        if q in AUTOGRAD_FUNCTION_BASES or q in NOT_MODULES:
            return False
        if q.startswith("torch.nn.") and q.rpartition(".")[2][:1].isupper():
            continue
        own = classes.get(b.id) if isinstance(b, ast.Name) else None
        if own is None or own.node is node or not _plain_module_class(own.node, ctx, depth + 1):
            return False
    return True


def _gradient_rule(fn: ast.FunctionDef) -> bool:
    """``backward(self, grad, ...)`` returns a value computed from its first argument."""
    args = fn.args.args
    if len(args) < 2:
        return False
    grad = args[1].arg
    return any(r.value is not None and any(isinstance(n, ast.Name) and n.id == grad
                                           for n in walk(r.value)) for r in _returns(fn))


def _called_by_hand(ctx: Context) -> bool:
    """Some ``x.backward(arg)`` call of the file is given a positional argument and is not a
    plain loss's: code that runs backward methods itself (a hand-written backprop walking its
    layers) calls them this way, and which receiver is a layer is not followed."""
    for call, _s, _outer in call_sites(ctx, "backward"):
        f = call.func
        if isinstance(f, ast.Attribute) and call.args and \
                (ctx.qualified_name(f.value) or "") != "torch.autograd":
            if not _self_seeded(call):
                return True
        if isinstance(f, ast.Name):
            return True  # `backward(grad)` of an imported helper or a method alias
    return False


def _strip(e: ast.AST) -> ast.AST:
    """``loss.detach()``, ``loss.clone()``, ``loss.data``: the same value as ``loss``."""
    while True:
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
                and e.func.attr in ("detach", "clone") and not e.args:
            e = e.func.value
        elif isinstance(e, ast.Attribute) and e.attr == "data":
            e = e.value
        else:
            return e


def _same(a: ast.AST, b: ast.AST) -> bool:
    name = dotted(_strip(a))
    return name is not None and name == dotted(_strip(b))


def _seed(call: ast.Call, pos: int, kw: str) -> ast.expr | None:
    if len(call.args) > pos:
        return call.args[pos]
    return next((k.value for k in call.keywords if k.arg == kw), None)


def _self_seeded(call: ast.Call, ctx: Context | None = None) -> ast.expr | None:
    """The differentiated value when the gradient handed to it is that value itself:
    ``loss.backward(loss)``, ``torch.autograd.backward(loss, loss)``,
    ``torch.autograd.grad(loss, params, grad_outputs=loss)``."""
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr == "backward" and (
            ctx is None or (ctx.qualified_name(f.value) or "") != "torch.autograd"):
        g = _seed(call, 0, "gradient")
        return f.value if g is not None and _same(f.value, g) else None
    if ctx is None:
        return None
    q = ctx.qualified_name(f) or ""
    if q in ("torch.autograd.backward", "torch.autograd.grad"):
        out = _seed(call, 0, "tensors" if q.endswith("backward") else "outputs")
        g = _seed(call, 1, "grad_tensors") if q.endswith("backward") \
            else _seed(call, 2, "grad_outputs")
        if out is None or g is None:
            return None
        if isinstance(out, (ast.List, ast.Tuple)) and isinstance(g, (ast.List, ast.Tuple)):
            pairs = list(zip(out.elts, g.elts))
        else:
            pairs = [(out, g)]
        return next((o for o, x in pairs if _same(o, x)), None)
    return None


def _stepped_argument(value: ast.expr, call: ast.Call, ctx: Context) -> bool:
    """``value`` is a parameter of the enclosing function, which after ``call`` steps an
    optimizer itself or through a method of its class it calls on ``self``: the function is a
    training step handed its loss (CRSLab's ``backward(self, loss)``), not an objective
    built on a feature map."""
    fn = ctx.function
    if fn is None or not isinstance(value, ast.Name):
        return False
    a = fn.args
    if value.id not in {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}:
        return False
    if any(s.call.lineno > call.lineno for s in step_calls(ctx, fn).steps):
        return True
    cls = ctx.class_def
    if cls is None:
        return False
    methods = {m.name: m for m in cls.body if isinstance(m, ast.FunctionDef) and m is not fn}
    for c in walk(fn):
        if isinstance(c, ast.Call) and c.lineno > call.lineno \
                and isinstance(c.func, ast.Attribute) and isinstance(c.func.value, ast.Name) \
                and c.func.value.id == "self" and c.func.attr in methods \
                and step_calls(ctx, methods[c.func.attr]).steps:
            return True
    return False


class ModuleBackwardNeverCalled(Rule):
    """An `nn.Module` defines `backward(self, grad)` returning a gradient: autograd never
    calls it.

    Why: autograd differentiates the operations `forward` runs; a Module has no `backward`
    hook of its own, so a method of that name is an ordinary method nothing calls. A gradient
    reversal layer written this way (`forward` returns `x`, `backward` returns `-grad`)
    reverses nothing: the adversarial loss reaches the encoder with its own sign and pulls it
    the wrong way; a straight-through module whose `forward` rounds gives no gradient at all.
    Write the rule as a `torch.autograd.Function` (static `forward(ctx, x)` and
    `backward(ctx, grad)`) and call `Fn.apply(x)` from the module's `forward`.
    Known limits: only classes whose bases are `torch.nn` classes (or the file's own); a file
    that calls `x.backward(arg)` on anything but its losses (a hand-written backprop over its
    layers) is left alone, and so is a method another file of the project calls with the
    arguments it takes (a flow layer's inverse, `layer.backward(z, log_df_dz)`), and a
    `backward` that is `forward` with attributes `__init__` derives from forward's (a
    permutation's inverse, `x[:, self.invperm]` beside `x[:, self.perm]`).
    """

    code = "GT795"
    name = "module-backward-never-called"
    message = ("`{cls}` is an `nn.Module`: autograd never calls its `backward` (line {line}), "
               "so this gradient rule is never applied; write it as a `torch.autograd.Function`"
               " and call `.apply(...)` from `forward`")
    triggers = ("backward",)
    gate_statements = True
    examples = [
        Bad("""
            import torch.nn as nn

            class GradReverse(nn.Module):
                def forward(self, x):
                    return x

                def backward(self, grad_output):
                    return -grad_output
            """, at=(3, 0)),
        Good("""
            import torch
            import torch.nn as nn

            class _Reverse(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x.view_as(x)

                @staticmethod
                def backward(ctx, grad_output):
                    return -grad_output

            class GradReverse(nn.Module):
                def forward(self, x):
                    return _Reverse.apply(x)
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        fn = next((s for s in node.body if isinstance(s, ast.FunctionDef)
                   and s.name == "backward"), None)
        if fn is None or fn.decorator_list or not _gradient_rule(fn) \
                or not _plain_module_class(node, ctx) or _called_by_hand(ctx) \
                or called_elsewhere(ctx, fn) \
                or mirrors_forward(node, fn):  # NOTE [an inverse that mirrors forward]
            return
        yield self.report(node, ctx, related=(Related(
            ctx.path, fn.lineno, "the gradient rule autograd never calls", ctx.column(fn)),),
            cls=node.name, line=fn.lineno)


class BackwardSeededWithItself(Rule):
    """`loss.backward(loss)`: the value differentiated is also given as its gradient.

    Why: the argument of `backward` (`gradient=`, `grad_tensors=`, `grad_outputs=`) is the
    gradient of the final objective with respect to the tensor, the seed autograd multiplies
    every gradient by. Seeding a loss with itself makes
    every `.grad` the true gradient times the loss's current value (the gradient of
    `loss ** 2 / 2`): the step size follows the loss, so training crawls when the loss is
    small and blows up when it is large. A scalar loss needs no argument: `loss.backward()`.
    A value of many elements seeded with itself gives the gradient of `(v ** 2).sum() / 2`
    (DeepDream's `activations.backward(activations)`; `backward()` alone would raise there):
    left alone.
    Known limits: the same name (or its `.detach()`/`.clone()`/`.data`) in both places, a
    value the file shows to hold one element (a reduction, a default-reduction loss), or a
    parameter of a function that then steps an optimizer (itself or through a method it
    calls on `self`): a training step handed its loss.
    """

    code = "GT796"
    name = "backward-seeded-with-itself"
    message = ("`{value}` is given as its own gradient: every `.grad` is multiplied by the "
               "current value of `{value}`; call `backward()` without it")
    triggers = ("backward", "grad")
    examples = [
        Bad("""
            import torch
            w = torch.randn(3, requires_grad=True)
            loss = (w ** 2).sum()
            loss.backward(loss)
            """, at=(4, 0)),
        Bad("""
            import torch
            w = torch.randn(3, requires_grad=True)
            loss = (w ** 2).sum()
            torch.autograd.backward(loss, grad_tensors=loss.detach())
            """, at=(4, 0)),
        Good("""
            import torch
            w = torch.randn(3, requires_grad=True)
            out = w * 2
            out.backward(torch.ones_like(out))
            loss = (w ** 2).sum()
            loss.backward()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        got = _self_seeded(node, ctx)
        if got is None:
            return
        value = _strip(got)
        r = rank(value, ctx.scope(), ctx, node.lineno)
        if r is None and not _stepped_argument(value, node, ctx) \
                or r is not None and r.what not in (SCALAR, ONE):
            return  # not known to hold one element: `v.backward(v)` may mean (v**2).sum()/2
        yield self.report(node, ctx, value=ctx.source(got))
