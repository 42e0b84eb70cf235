"""GT713: an optimizer that differentiates `.grad` stepped after a `backward()` with no graph."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.kinds import OBJECT
from gradtrace.lint.analysis.modules import ClassInfo
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule

GRAD_CALLS = frozenset({"torch.autograd.grad"})


class HessianStepAfterPlainBackward(Rule):
    """An optimizer class of the file differentiates the gradients in `step()` (a Hessian
    estimate: `torch.autograd.grad(grads, params, grad_outputs=z)` over `p.grad`), and the
    training code steps it after a `backward()` without `create_graph=True`.

    Why: `backward()` leaves `.grad` without a graph unless it is given `create_graph=True`;
    differentiating those gradients again (Hutchinson's estimate in SophiaH, AdaHessian)
    raises `RuntimeError: element 0 of tensors does not require grad and does not have a
    grad_fn` on the first step (kozistr/pytorch_optimizer#193, checked on torch 2.13). Call
    `loss.backward(create_graph=True)` before such an optimizer's step.
    Known limits: the optimizer must be an instance of a class of this file whose `step`
    (or a method it calls through `self`) calls `torch.autograd.grad` on values read from
    `.grad`; the `backward()` must come before the `step()` in the same function.
    """

    code = "GT713"
    name = "hessian-step-after-plain-backward"
    message = ("`{call}` leaves the gradients without a graph, but `{opt}.step()` (line "
               "{line}) differentiates them again (`{grad}`): it raises `element 0 of "
               "tensors does not require grad`; pass `create_graph=True`")
    triggers = (".backward(",)
    gate_statements = True
    examples = [
        Bad("""
            import torch

            class HessianSGD(torch.optim.Optimizer):
                def __init__(self, params, lr=0.1):
                    super().__init__(params, dict(lr=lr))

                def step(self):
                    params = [p for g in self.param_groups for p in g['params']]
                    grads = [p.grad for p in params]
                    zs = [torch.randn_like(p) for p in params]
                    hz = torch.autograd.grad(grads, params, grad_outputs=zs)
                    with torch.no_grad():
                        for p, h in zip(params, hz):
                            p.sub_(p.grad / (h.abs() + 1))

            opt = HessianSGD(model.parameters())
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            """, at=(18, 0)),
        Good("""
            loss = model(x).pow(2).mean()
            loss.backward(create_graph=True)
            opt.step()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if not (isinstance(f, ast.Attribute) and f.attr == "backward") or any(
                k.arg == "create_graph" for k in node.keywords) or len(node.args) > 2:
            return
        an = ctx.analysis
        if not ctx.memo("gt713-any", ctx.tree, lambda: any(
                differentiated_grads(ctx, c) is not None for c in an.classes.values())):
            return  # no optimizer class of the file differentiates `.grad`
        where = ctx.function if ctx.function is not None else ctx.tree
        scope = ctx.scope(where)
        steps = ctx.memo("gt713-steps", where, lambda: [
            n for n in walk(where) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute) and n.func.attr == "step"])
        for n in steps:
            if n.lineno <= node.lineno:
                continue
            k = an.kind(n.func.value, scope, n.lineno)
            cls = an.classes.get(k.cls or "") if k is not None and k.what == OBJECT else None
            grad = differentiated_grads(ctx, cls) if cls is not None else None
            if grad is not None:
                yield self.report(node, ctx, related=[Related(
                    ctx.path, grad.lineno, "the optimizer differentiates the gradients here",
                    ctx.column(grad))], call=ctx.source(node), opt=ctx.source(n.func.value),
                    line=n.lineno, grad=_short(ctx, grad))
                return


def differentiated_grads(ctx: Context, cls: ClassInfo) -> ast.Call | None:
    """The ``torch.autograd.grad`` call of the class's ``step`` (or a method it calls through
    ``self``) whose outputs are read from ``.grad`` (directly or through a name the method
    binds to them)."""
    def make() -> ast.Call | None:
        todo, seen = ["step"], set()
        while todo:
            m = cls.methods.get(todo.pop())
            if m is None or m.name in seen:
                continue
            seen.add(m.name)
            graded = {t.id for s in walk(m) if isinstance(s, ast.Assign) and _reads_grad(s.value)
                      for t in s.targets if isinstance(t, ast.Name)}
            for n in walk(m):
                if not isinstance(n, ast.Call):
                    continue
                if isinstance(n.func, ast.Attribute) and dotted(n.func.value) == "self":
                    todo.append(n.func.attr)
                elif ctx.qualified_name(n.func) in GRAD_CALLS:
                    out = n.args[0] if n.args else next(
                        (k.value for k in n.keywords if k.arg == "outputs"), None)
                    if out is not None and (_reads_grad(out) or any(
                            isinstance(x, ast.Name) and x.id in graded for x in walk(out))):
                        return n
        return None
    return ctx.memo("gt713-differentiated", cls.node, make)


def _reads_grad(e: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "grad" for n in walk(e))


def _short(ctx: Context, call: ast.Call) -> str:
    out = call.args[0] if call.args else None
    return f"{ctx.source(call.func)}({ctx.source(out) if out is not None else ''}, ...)"
