"""GT121: a backward hook that builds a graph and differentiates it, run with grad off."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.callees import resolve
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.grad_mode._helper_gradients import _own_gradient

# NOTE [hooks run in the backward's grad mode]
# The autograd engine runs a backward pass with grad mode set to its `create_graph`: a
# module's backward hook (`register_full_backward_hook`, `register_backward_hook`, the
# backward pre-hook) and a tensor's `register_hook` run inside it, with grad off for a plain
# `loss.backward()`. What such a hook computes records no graph, and a gradient it takes of a
# value it computed raises `element 0 of tensors does not require grad` (pytorch#90520,
# checked on torch 2.13). A hook whose gradient part stands in `torch.enable_grad()` (or that
# is decorated so) is right, and so is every hook of a file that asks for `create_graph` in
# some call (a double backward runs its hooks with grad on).
BACKWARD_HOOKS = frozenset({"register_full_backward_hook", "register_backward_hook",
                            "register_full_backward_pre_hook", "register_hook"})


def _graph_built(ctx: Context) -> bool:
    """Some call of the file passes ``create_graph`` other than ``False``."""
    def make() -> bool:
        for n in ast.walk(ctx.tree):
            if isinstance(n, ast.Call) and any(
                    k.arg == "create_graph" and not (
                        isinstance(k.value, ast.Constant) and k.value.value is False)
                    for k in n.keywords):
                return True
        return False
    return ctx.mentions("create_graph") and ctx.memo("gt121-create-graph", ctx.tree, make)


class GradientTakenInBackwardHook(Rule):
    """A function registered as a backward hook (`register_full_backward_hook`,
    `register_backward_hook`, a tensor's `register_hook`) computes a value and takes its
    gradient (`out.backward()`, `torch.autograd.grad(out, ...)`).

    Why: the autograd engine runs the hooks of a backward pass in that pass's grad mode, off
    for a plain `loss.backward()` (on only with `create_graph=True`): the value the hook
    computes has no `grad_fn` and the gradient call raises `RuntimeError: element 0 of tensors
    does not require grad and does not have a grad_fn` (pytorch#90520; checked on torch
    2.13). Compute and differentiate it inside `with torch.enable_grad():`.
    Known limits: the hook must be a function or method of this file given by name (or
    `self.method`), differentiate a value it computes itself under no `if`; a file that asks
    for `create_graph` anywhere is left alone.
    """

    code = "GT121"
    name = "gradient-taken-in-backward-hook"
    message = ("`{value}` is computed in `{hook}`, a backward hook (registered line {line}), "
               "and differentiated there (`{grad}`): hooks run with grad off during "
               "`backward()`, so it has no graph and the call raises `element 0 of tensors "
               "does not require grad`; wrap that part in `torch.enable_grad()`")
    triggers = ("register_full_backward_hook", "register_backward_hook",
                "register_full_backward_pre_hook", "register_hook")
    examples = [
        Bad("""
            import torch
            import torch.nn as nn

            def probe(module, grad_in, grad_out):
                w = torch.ones(3, requires_grad=True)
                score = (w * 2).sum()
                score.backward()

            layer = nn.Linear(3, 3)
            layer.register_full_backward_hook(probe)
            layer(torch.randn(2, 3)).sum().backward()
            """, at=(6, 4)),
        Good("""
            import torch
            import torch.nn as nn

            def probe(module, grad_in, grad_out):
                w = torch.ones(3, requires_grad=True)
                with torch.enable_grad():
                    score = (w * 2).sum()
                    score.backward()

            layer = nn.Linear(3, 3)
            layer.register_full_backward_hook(probe)
            layer(torch.randn(2, 3)).sum().backward()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        """``m.register_full_backward_hook(fn)`` and the like, ``fn`` a function of the file
        that differentiates what it computes (NOTE [hooks run in the backward's grad mode])."""
        f = node.func
        if not (isinstance(f, ast.Attribute) and f.attr in BACKWARD_HOOKS and node.args) \
                or _graph_built(ctx):
            return
        hook = node.args[0]
        if not isinstance(hook, (ast.Name, ast.Attribute)):
            return
        where = ctx.function or ctx.tree
        got = resolve(ctx, where, ast.copy_location(
            ast.Call(func=hook, args=[], keywords=[]), node))
        if got is None:
            return
        fn = got[0]
        grad = _own_gradient(ctx, fn, None, True)
        if grad is None:
            return
        target = grad.args[0] if not (isinstance(grad.func, ast.Attribute)
                                      and grad.func.attr == "backward") else grad.func.value
        root = target
        while isinstance(root, (ast.Call, ast.Attribute, ast.Subscript)):
            root = root.func if isinstance(root, ast.Call) else root.value
        at: ast.AST = grad
        if isinstance(root, ast.Name):
            b = ctx.scope(fn).binding_before(root.id, grad.lineno)
            if b is not None and isinstance(b.stmt, ast.Assign):
                at = b.stmt
        yield self.report(at, ctx, related=(
            Related(ctx.path, node.lineno, "registered as a backward hook here",
                    ctx.column(node)),
            Related(ctx.path, grad.lineno, "the gradient is taken here", ctx.column(grad))),
            value=ctx.source(root) if isinstance(root, ast.Name) else ctx.source(target),
            hook=fn.name, line=node.lineno, grad=ctx.source(grad.func))
