"""GT474: a tensor that already requires grad is wrapped in a new Parameter for the optimizer."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import of_types, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.registration.lazy_optim import new_leaf

# NOTE [wrapped leaf handed away]
# `nn.Parameter(t)` is a new tensor object over `t`'s memory (`Tensor._make_subclass`), and
# `nn.ParameterList([t])` / `ParameterDict({k: t})` wrap every plain tensor so (their
# `__setitem__`, torch 2.13: `ParameterList([t])[0] is t` is False). When `t` is itself a leaf
# that requires grad and the code keeps computing with `t`, the loss's gradient lands on
# `t.grad`; the wrapper, which is what the optimizer was given, never gets one (its `.grad`
# stays None), so the optimizer skips it and the value never moves.
WRAPPERS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter",
                      "torch.nn.ParameterList", "torch.nn.ParameterDict",
                      "torch.nn.modules.container.ParameterList",
                      "torch.nn.modules.container.ParameterDict"})


def _wrapped(call: ast.Call) -> list[ast.expr]:
    """The tensors ``call`` wraps: ``Parameter(t)``'s argument, a display's elements, a dict
    display's values."""
    if not call.args:
        return []
    a = call.args[0]
    if isinstance(a, (ast.List, ast.Tuple)):
        return list(a.elts)
    if isinstance(a, ast.Dict):
        return [v for v in a.values if v is not None]
    return [a]


class LeafWrappedForOptimizer(Rule):
    """A tensor made with `requires_grad=True` is handed to the optimizer inside a new
    `nn.Parameter` / `nn.ParameterList`, while the loss is computed from the tensor itself.

    Why: `ParameterList([self.log_alpha])` wraps the tensor in a new Parameter object
    (NOTE [wrapped leaf handed away]); the loss differentiates `self.log_alpha`, so the
    gradient lands on it, and the Parameter the optimizer steps keeps `grad` None: the value
    never changes, silently (tianshou's `AutoAlpha` before commit 8e593e5: alpha stays at
    its initial value). Make the tensor a Parameter where it is created
    (`self.log_alpha = nn.Parameter(torch.tensor(0.0))`) and hand that object to the
    optimizer.
    Known limits: the tensor is a plain name of the function or a `self.<attr>` of the class
    made by a tensor factory with `requires_grad=True` (or `.requires_grad_()`), the wrapper is
    handed straight to a call (not bound to a name), and the tensor is read again elsewhere.
    """

    code = "GT474"
    name = "leaf-wrapped-for-optimizer"
    message = ("`{wrap}` wraps `{name}`, which already requires grad, in a new Parameter: the "
               "loss differentiates `{name}`, so the wrapper handed to `{callee}` never gets a "
               "gradient and never changes")
    triggers = ("Parameter",)
    gate_statements = True
    examples = [
        Bad("""
            import torch
            class AutoAlpha(torch.nn.Module):
                def __init__(self, lr):
                    super().__init__()
                    self.log_alpha = torch.zeros(1, requires_grad=True)
                    self.optim = torch.optim.Adam(torch.nn.ParameterList([self.log_alpha]), lr=lr)
                def update(self, entropy):
                    loss = -(self.log_alpha * entropy).mean()
                    self.optim.zero_grad()
                    loss.backward()
                    self.optim.step()
            """, at=(6, 38)),
        Good("""
            import torch
            class AutoAlpha(torch.nn.Module):
                def __init__(self, lr):
                    super().__init__()
                    self.log_alpha = torch.nn.Parameter(torch.zeros(1))
                    self.optim = torch.optim.Adam(self.parameters(), lr=lr)
                def update(self, entropy):
                    loss = -(self.log_alpha * entropy).mean()
                    self.optim.zero_grad()
                    loss.backward()
                    self.optim.step()
            """),
        Good("""
            import torch
            def fit(shape, steps):
                init = torch.zeros(shape)
                opt = torch.optim.Adam([torch.nn.Parameter(init)])
                return opt
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        fn = ctx.function
        if fn is None or (ctx.call_name(node) or "") not in WRAPPERS:
            return
        outer = self._handed_to(node, fn)
        if outer is None:
            return
        for e in _wrapped(node):
            name = dotted(e)
            if not name or name.count(".") > 1:
                continue
            made = self._leaf_made(name, fn, node, ctx)
            if made is None or not self._read_elsewhere(name, node, fn, ctx):
                continue
            yield self.report(node, ctx, related=(Related(
                ctx.path, made.lineno, f"`{name}` is made here, requiring grad",
                ctx.column(made)),), wrap=ctx.source(node), name=name,
                callee=ctx.source(outer.func))
            return

    @staticmethod
    def _handed_to(node: ast.Call, fn: ast.AST) -> ast.Call | None:
        """The call ``node`` is an argument of (directly or in a list display)."""
        for c in of_types(fn, (ast.Call,)):
            if c is node:
                continue
            for a in [*c.args, *(k.value for k in c.keywords)]:
                if a is node or isinstance(a, (ast.List, ast.Tuple)) and any(
                        x is node for x in a.elts):
                    return c
        return None

    @staticmethod
    def _leaf_made(name: str, fn: ast.AST, node: ast.Call, ctx: Context) -> ast.stmt | None:
        """The statement that makes ``name`` a new leaf requiring grad (its only binding)."""
        if name.startswith("self."):
            cls = ctx.analysis.class_of(fn)
            info = cls.attrs.get(name[5:]) if cls is not None else None
            if info is None or info.later or info.value is None \
                    or not new_leaf(info.value, ctx):
                return None
            return info.stmt
        if "." in name:
            return None
        scope = ctx.scope(fn)
        bs = scope.bindings.get(name, ())
        if len(bs) != 1 or bs[0].line >= node.lineno or not isinstance(bs[0].value, ast.expr) \
                or not new_leaf(bs[0].value, ctx):
            return None
        return bs[0].stmt

    @staticmethod
    def _read_elsewhere(name: str, node: ast.Call, fn: ast.AST, ctx: Context) -> bool:
        """``name`` is read outside the wrapping call and its own binding: in the class's
        methods for ``self.<attr>``, in the function for a plain name."""
        inside = {id(x) for x in walk(node)}
        where: list[ast.AST] = [fn]
        if name.startswith("self."):
            cls = ctx.analysis.class_of(fn)
            where = list(cls.methods.values()) if cls is not None else [fn]
        for w in where:
            for x in walk(w):
                if id(x) in inside or not isinstance(x, (ast.Name, ast.Attribute)) \
                        or not isinstance(x.ctx, ast.Load) or dotted(x) != name:
                    continue
                return True
        return False
