"""GT714: a gradient hook registered on every parameter of a model the file freezes a part of."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.frozen_params import freeze_statement
from gradtrace.lint.analysis.params import PARAM_ITERS
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule

WRAPPERS = frozenset({"enumerate", "zip", "list", "tuple", "reversed"})


def _iterables(it: ast.expr) -> list[ast.expr]:
    """``it`` with ``enumerate``/``zip``/``list`` peeled off: the collections walked."""
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in WRAPPERS:
        return [x for a in it.args for x in _iterables(a)]
    return [it]


def _weights_of_layers(e: ast.expr | None) -> bool:
    """``[getattr(m, name) for m in layers]`` / ``[m.weight for m in layers]``: one weight of
    each of several layers."""
    if not isinstance(e, ast.ListComp) or len(e.generators) != 1:
        return False
    elt, var = e.elt, dotted(e.generators[0].target)
    if isinstance(elt, ast.Call) and isinstance(elt.func, ast.Name) and elt.func.id == "getattr" \
            and len(elt.args) == 2:
        return dotted(elt.args[0]) == var
    return isinstance(elt, ast.Attribute) and elt.attr in ("weight", "bias") \
        and dotted(elt.value) == var


def _walks_parameters(it: ast.expr, ctx: Context) -> bool:
    """A collection of a model's parameters: ``m.parameters()``/``m.named_parameters()``, or
    ``self.<attr>`` bound in ``__init__`` to the weights of a list of layers."""
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) \
            and it.func.attr in PARAM_ITERS:
        return True
    if isinstance(it, ast.Attribute) and isinstance(it.value, ast.Name) \
            and it.value.id == "self":
        cls = ctx.analysis.class_of(ctx.function)
        info = cls.attrs.get(it.attr) if cls is not None else None
        return info is not None and not info.later and _weights_of_layers(info.value)
    return False


class HookOnFrozenParameter(Rule):
    """`p.register_hook(...)` for every parameter of a model (a loop over
    `model.named_parameters()`, or over the weights of its layers) in a file that freezes some
    of them, with no `requires_grad` check.

    Why: `register_hook` on a tensor that does not require grad raises `RuntimeError: cannot
    register a hook on a tensor that doesn't require gradient` (checked on torch 2.13). A
    gradient monitor, a pruning mask or a clipping hook written for fully trained models
    crashes as soon as a layer is frozen (`requires_grad = False`, `requires_grad_(False)`,
    `nn.Embedding.from_pretrained(...)`, frozen by default). Skip those:
    `if p.requires_grad: p.register_hook(...)`.
    Known limits: the file must freeze a parameter and never set `requires_grad` back on;
    the loop must walk `parameters()`/`named_parameters()` (also under `enumerate`/`zip`), or
    a `self` list of the layers' weights made in `__init__`; a function that mentions
    `requires_grad` is trusted.
    """

    code = "GT714"
    name = "hook-on-frozen-parameter"
    message = ("`{call}` registers a gradient hook on every parameter, but line {line} "
               "freezes some: `register_hook` raises `cannot register a hook on a tensor that "
               "doesn't require gradient`; skip them with `if {var}.requires_grad:`")
    triggers = ("register_hook",)
    examples = [
        Bad("""
            import torch.nn as nn

            def watch(model, log):
                for name, p in model.named_parameters():
                    p.register_hook(lambda g, name=name: log.append((name, g.norm())))

            net = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
            for p in net[0].parameters():
                p.requires_grad = False
            watch(net, [])
            """, at=(5, 8)),
        Good("""
            import torch.nn as nn

            def watch(model, log):
                for name, p in model.named_parameters():
                    if p.requires_grad:
                        p.register_hook(lambda g, name=name: log.append((name, g.norm())))

            net = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
            for p in net[0].parameters():
                p.requires_grad = False
            watch(net, [])
            """),
        Good("""
            import torch.nn as nn

            def watch(model, log):
                for name, p in model.named_parameters():
                    p.register_hook(lambda g, name=name: log.append((name, g.norm())))

            net = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
            watch(net, [])
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if not (isinstance(f, ast.Attribute) and f.attr == "register_hook"
                and isinstance(f.value, ast.Name)):
            return
        freeze = freeze_statement(ctx)
        if freeze is None:
            return
        var = f.value.id
        fn = ctx.function or ctx.tree
        if any("requires_grad" in ctx.code_line(i) for i in range(
                fn.lineno if fn is not ctx.tree else 1,
                (getattr(fn, "end_lineno", None) or node.lineno) + 1)):
            return
        loop = next((lp for lp in reversed(ctx.scope().loops_of(node))
                     if var in {n.id for n in walk(lp.target) if isinstance(n, ast.Name)}),
                    None)
        if loop is None or not any(_walks_parameters(it, ctx) for it in _iterables(loop.iter)):
            return
        yield self.report(node, ctx, related=(Related(
            ctx.path, freeze.lineno, "a parameter is frozen here", ctx.column(freeze)),),
            call=ctx.source(f) + "(...)", line=freeze.lineno, var=var)
