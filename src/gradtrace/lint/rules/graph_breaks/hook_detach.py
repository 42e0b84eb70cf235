"""GT571: a forward hook that returns its module's output detached: the hook's return replaces
the output, so the loss reaches nothing before it."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.returned_terms import returns
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.autograd_api.module_hooks import _hook_function


def _cut_of(e: ast.AST | None, out: str) -> bool:
    """``out.detach()`` / ``out.data`` (also ``out.detach().clone()``): the output cut."""
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr in ("clone", "contiguous") and not e.args:
        e = e.func.value
    if isinstance(e, ast.Attribute) and e.attr == "data":
        return dotted(e.value) == out
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
        and e.func.attr in ("detach", "detach_") and not e.args and dotted(e.func.value) == out


class ForwardHookReturnsDetached(Rule):
    """A forward hook returns its module's output detached (`return output.detach()`): the
    module's output is replaced by the detached tensor, so nothing before it gets a gradient.

    Why: a forward hook that returns a value other than None replaces the module's output
    with it (PyTorch's `register_forward_hook` contract). A hook written to keep the features
    (`features["x"] = output; return output.detach()`) then cuts the model at that layer: on
    torch 2.13 the loss computed after it has no path to the hooked layer and the layers
    before it (`backward()` raises `element 0 of tensors does not require grad` when nothing
    else is trained, or they silently keep their weights). Store the detached copy and return
    nothing.
    Known limits: the hook must be a function, method or lambda of the file registered with
    `register_forward_hook`, every `return` with a value returning the output parameter cut by
    `.detach()`/`.data`, the first of them in the hook's own body (not only in an arm: a
    `detach_output` option is a choice), and the file must run a backward.
    """

    code = "GT571"
    name = "forward-hook-returns-detached"
    message = ("the forward hook `{hook}` returns `{expr}`: a forward hook's return replaces "
               "the output of the module it is registered on (line {line}), so the loss "
               "reaches neither that module nor anything before it; keep the detached copy "
               "elsewhere and return None")
    triggers = ("register_forward_hook",)
    examples = [
        Bad("""
            import torch.nn as nn
            feats = {}
            def keep(module, inputs, output):
                feats["fc1"] = output
                return output.detach()
            model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
            model[0].register_forward_hook(keep)
            model(x).sum().backward()
            """, at=(5, 11)),
        Bad("""
            import torch.nn as nn
            model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
            model[2].register_forward_hook(lambda m, i, o: o.data)
            model(x).sum().backward()
            """, at=(3, 47)),
        Good("""
            import torch.nn as nn
            feats = {}
            def keep(module, inputs, output):
                feats["fc1"] = output.detach()
            def scale(module, inputs, output):
                return output * 0.5
            model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
            model[0].register_forward_hook(keep)
            model[2].register_forward_hook(scale)
            def grab(module, inputs, output, detach_output=False):
                if detach_output:
                    return output.detach()
            model[1].register_forward_hook(grab)
            model(x).sum().backward()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if not (isinstance(f, ast.Attribute) and f.attr == "register_forward_hook"
                and node.args and ctx.mentions("backward")):
            return
        got = _hook_function(ctx, node.args[0], ctx.function)
        if got is None or len(got[1]) < 3:
            return
        hook, params = got
        out = params[2]
        if isinstance(hook, ast.Lambda):
            values = [hook.body]
        else:
            values = [r.value for r in returns(hook.body)  # type: ignore[attr-defined]
                      if r.value is not None and not (isinstance(r.value, ast.Constant)
                                                      and r.value.value is None)]
        if not values or not all(_cut_of(v, out) for v in values):
            return
        if not isinstance(hook, ast.Lambda) and not any(
                isinstance(st, ast.Return) and st.value is values[0] for st in hook.body):
            return  # a detach the hook returns only in some arm (`if detach_output:`): chosen
        seen: set[int] = ctx.memo("gt571-seen", ctx.tree, set)
        if id(values[0]) in seen:
            return
        seen.add(id(values[0]))
        name = getattr(hook, "name", "lambda")
        yield self.report(values[0], ctx, related=[Related(
            ctx.path, node.lineno, "registered here", ctx.column(node))],
            hook=name, expr=ctx.source(values[0]), line=node.lineno)
