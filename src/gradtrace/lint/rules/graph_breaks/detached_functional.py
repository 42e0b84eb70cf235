"""GT157: ``torch.func.functional_call`` runs a module on detached copies of its own parameters
while the caller trains by ``backward()``."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.backpropagated import backpropagated_at
from gradtrace.lint.analysis.steps import backward_loss
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import bfs_walk
from gradtrace.lint.rule import Bad, Good, Rule

FUNCTIONAL_CALLS = frozenset({"torch.func.functional_call",
                              "torch.nn.utils.stateless.functional_call",
                              "torch.nn.utils.stateless._functional_call"})
# calls that differentiate or make leaves on purpose: detached copies are then meant (MAML's
# fast weights with ``requires_grad_()``, ``torch.func.grad(loss_fn)(params, ...)``)
EXPLICIT = frozenset({"torch.autograd.grad", "torch.func.grad", "torch.func.grad_and_value",
                      "torch.func.vjp", "torch.func.jacrev", "torch.func.jacfwd",
                      "torch.func.vmap", "torch.vmap", "functorch.grad", "functorch.vmap"})


def _cut_of(e: ast.AST, var: str) -> bool:
    """``var.detach()``, ``var.data``, and the same followed or preceded by ``.clone()``."""
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and \
            e.func.attr in ("clone", "to", "float", "contiguous") and not e.args[1:]:
        inner = e.func.value
        if isinstance(inner, ast.Name):
            return False
        e = inner
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and \
                e.func.attr == "detach" and isinstance(e.func.value, ast.Name):
            return e.func.value.id == var
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "detach":
        e = e.func.value
    elif isinstance(e, ast.Attribute) and e.attr == "data":
        e = e.value
    else:
        return False
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "clone":
        e = e.func.value
    return isinstance(e, ast.Name) and e.id == var


def _named_params(it: ast.AST) -> bool:
    """``m.named_parameters()`` (or ``dict(m.named_parameters()).items()``)."""
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr == "items":
        v = it.func.value
        if isinstance(v, ast.Call) and dotted(v.func) == "dict" and v.args:
            it = v.args[0]
    return isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and \
        it.func.attr == "named_parameters"


def detached_params(e: ast.AST) -> bool:
    """A dict of a module's parameters by name, each detached: ``{k: v.detach() for k, v in
    m.named_parameters()}``, ``dict((k, v.data) for k, v in m.named_parameters())``."""
    if isinstance(e, ast.Call) and dotted(e.func) == "dict" and len(e.args) == 1 and \
            isinstance(e.args[0], (ast.GeneratorExp, ast.ListComp)) and \
            isinstance(e.args[0].elt, ast.Tuple) and len(e.args[0].elt.elts) == 2:
        gens, value = e.args[0].generators, e.args[0].elt.elts[1]
    elif isinstance(e, ast.DictComp):
        gens, value = e.generators, e.value
    else:
        return False
    if len(gens) != 1 or not _named_params(gens[0].iter):
        return False
    t = gens[0].target
    return isinstance(t, ast.Tuple) and len(t.elts) == 2 and isinstance(t.elts[1], ast.Name) \
        and _cut_of(value, t.elts[1].id)


def _functional_slot(fn: ast.AST, ctx: Context) -> int | None:
    """The position (after ``self``) of the parameter of ``fn`` it hands to ``functional_call``
    as the parameters dict."""
    args = [a.arg for a in fn.args.args]  # type: ignore[attr-defined]
    for c in bfs_walk(fn):
        if isinstance(c, ast.Call) and ctx.call_name(c) in FUNCTIONAL_CALLS and len(c.args) >= 2 \
                and isinstance(c.args[1], ast.Name) and c.args[1].id in args:
            return args.index(c.args[1].id) - (args[:1] in (["self"], ["cls"]))
    return None


class DetachedFunctionalParams(Rule):
    """`functional_call` runs the model on detached copies of its parameters, and the caller
    trains the model with `backward()`.

    Why: `torch.func.functional_call(model, params, args)` computes with the tensors in
    `params`, not with `model.parameters()`: the gradient of the loss goes to those tensors
    only. Copies made with `.detach()` (or `.data`) have no history and do not require grad,
    so `loss.backward()` raises `RuntimeError: element 0 of tensors does not require grad and
    does not have a grad_fn` (or, with another live input, leaves every `p.grad` None and
    `opt.step()` does nothing) (pytorch-facts.md#no-graph-loss). Pass `dict(model.named_parameters())`.
    A script that differentiates the copies on purpose (`requires_grad_()`,
    `torch.autograd.grad`, `torch.func.grad`/`vmap`) is left alone.
    The backward may also be its caller's, on what the function returns (`loss =
    compute_loss(model, batch); loss.backward()`: NOTE [backpropagated returns]).
    Known limits: the dict is built in the function (or script) that calls `backward()`, or in
    a function whose result a caller of the file backpropagates, and handed to
    `functional_call` there or through one function of the file.
    """

    code = "GT157"
    gate_statements = "function"
    name = "detached-functional-params"
    message = ("`{name}` holds detached copies of the parameters and `{call}` (line {line}) runs "
               "the model on them: the backward reaches none of the model's parameters")
    triggers = ("functional_call",)
    examples = [
        Bad("""
            import torch
            from torch.func import functional_call

            def fit(model, loader, opt):
                for x, y in loader:
                    params = {k: v.detach() for k, v in model.named_parameters()}
                    loss = torch.nn.functional.mse_loss(functional_call(model, params, (x,)), y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            """, at=(6, 17)),
        Good("""
            import torch
            from torch.func import functional_call

            def fit(model, loader, opt):
                for x, y in loader:
                    params = dict(model.named_parameters())
                    loss = torch.nn.functional.mse_loss(functional_call(model, params, (x,)), y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            """),
        Good("""
            import torch
            from torch.func import functional_call

            def inner_step(model, x, y, lr=0.1):
                fast = {k: v.detach().requires_grad_() for k, v in model.named_parameters()}
                loss = torch.nn.functional.mse_loss(functional_call(model, fast, (x,)), y)
                grads = torch.autograd.grad(loss, list(fast.values()))
                return {k: v - lr * g for (k, v), g in zip(fast.items(), grads)}
            """),
    ]

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> Iterator[Finding]:
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name) or \
                not detached_params(node.value):
            return
        name = node.targets[0].id
        owner: ast.AST = ctx.function if ctx.function is not None else ast.Module(
            body=[s for s in ctx.tree.body if not isinstance(s, (*FUNCTION_TYPES, ast.ClassDef))],
            type_ignores=[])
        calls = [c for c in bfs_walk(owner) if isinstance(c, ast.Call)]
        if any(ctx.call_name(c) in EXPLICIT or (isinstance(c.func, ast.Attribute)
               and c.func.attr == "requires_grad_") for c in calls):
            return
        use = None
        for c in calls:
            if c.lineno < node.lineno:
                continue
            if ctx.call_name(c) in FUNCTIONAL_CALLS and len(c.args) >= 2 and \
                    isinstance(c.args[1], ast.Name) and c.args[1].id == name:
                use = c
                break
            fn = ctx.analysis.callee(c, ctx.function)
            slot = _functional_slot(fn, ctx) if isinstance(fn, FUNCTION_TYPES) else None
            if slot is not None and slot < len(c.args) and isinstance(c.args[slot], ast.Name) \
                    and c.args[slot].id == name and not any(
                        ctx.call_name(d) in EXPLICIT for d in bfs_walk(fn)
                        if isinstance(d, ast.Call)):
                use = c
                break
        if use is None:
            return
        sink = next((c for c in calls if c.lineno > use.lineno and backward_loss(c, ctx)
                     is not None), None)
        if sink is None and isinstance(ctx.function, FUNCTION_TYPES) and any(
                isinstance(r, ast.Return) and r.value is not None and r.lineno >= use.lineno
                for r in bfs_walk(ctx.function)):  # its caller backpropagates what it returns
            sink = backpropagated_at(ctx).get(id(ctx.function))
        if sink is None:
            return
        yield self.report(node.value, ctx, name=name, call=ctx.source(use), line=use.lineno,
                          related=(Related(ctx.path, sink.lineno,
                                           f"`{ctx.source(sink)}` trains through it",
                                           ctx.column(sink)),))
