"""GT217: `retain_grad()` or `register_hook` on a value computed with grad off, here or
through the calls that lead to it."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.grad_off_calls import (
    _targets, computed, grad_off_functions, made_names, off_list, region_statements,
)
from gradtrace.lint.analysis.reach import disables_grad
from gradtrace.lint.context import Context
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule

ERRORS = {"retain_grad": "can't retain_grad on Tensor that has requires_grad=False",
          "register_hook": "cannot register a hook on a tensor that doesn't require gradient"}
# what a guard reads when it lets the operation run only where there is a graph
GUARD_ATTRS = frozenset({"requires_grad", "is_grad_enabled", "grad_fn", "training"})


def _guarded(ctx: Context) -> bool:
    """The statement sits under an ``if`` (or ``try``) that may keep it from raising."""
    for s in reversed(ctx.stmts[:-1]):
        if isinstance(s, FUNCTION_TYPES):
            return False
        if isinstance(s, ast.Try) and s.handlers:
            return True
        if isinstance(s, (ast.If, ast.While)) and any(
                (isinstance(n, ast.Attribute) and n.attr in GUARD_ATTRS)
                or (isinstance(n, ast.Name) and n.id in GUARD_ATTRS) for n in walk(s.test)):
            return True
    return False


def _flag_guards(ctx: Context, fn: ast.AST) -> list[tuple[str, bool]]:
    """The ``if flag:`` / ``if not flag:`` tests (``flag`` a parameter of ``fn``) that the
    statement sits under, each with the value of ``flag`` that lets it run."""
    params = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}  # type: ignore[attr-defined]
    out = []
    stmts = ctx.stmts
    for s, inner in zip(stmts, stmts[1:]):
        if not isinstance(s, ast.If):
            continue
        test, want = s.test, inner in s.body
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, want = test.operand, not want
        if isinstance(test, ast.Name) and test.id in params:
            out.append((test.id, want))
    return out


def _switch_left_off(ctx: Context) -> bool:
    """The statement sits under ``if self.flag:`` (or ``if not self.flag:``) and every value
    the file stores in an attribute of that name is a constant that keeps it from running
    (mPLUG-Owl's ``self.save_attention = False`` in ``__init__``, its Grad-CAM hook under
    ``if self.save_attention:``): the file never turns the switch on."""
    stmts = ctx.stmts
    for s, inner in zip(stmts, stmts[1:]):
        if not isinstance(s, ast.If):
            continue
        test, want = s.test, inner in s.body
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, want = test.operand, not want
        if not (isinstance(test, ast.Attribute) and dotted(test.value) == "self"):
            continue
        stored = [n.value for n in walk(ctx.tree) if isinstance(n, ast.Assign) for t in n.targets
                  if isinstance(t, ast.Attribute) and t.attr == test.attr]
        if stored and all(isinstance(v, ast.Constant) and bool(v.value) != want for v in stored) \
                and not ctx.mentions(f"'{test.attr}'", f'"{test.attr}"'):
            return True  # (nor set through its name: `setattr(m, "flag", True)`)
    return False


def _off_calls_pass_other(ctx: Context, fn: ast.AST, guards: list[tuple[str, bool]]) -> bool:
    """Every call that runs ``fn`` with grad off gives one of ``guards``' flags a constant
    (or leaves it to a constant default) that keeps the statement from running."""
    a = fn.args  # type: ignore[attr-defined]
    pos = [*a.posonlyargs, *a.args]
    defaults = dict(zip([p.arg for p in pos][len(pos) - len(a.defaults):], a.defaults))
    defaults.update((p.arg, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None)
    starts = [(off_list(ctx, w), where) for w, where in region_statements(ctx)]
    starts += [(off_list(ctx, e.fn), e.fn) for e in grad_off_functions(ctx).values()]
    seen = 0
    for nodes, where in starts:
        for n in nodes:
            if not isinstance(n, ast.Call):
                continue
            for target, binds in _targets(n, where, ctx):
                if target is not fn:
                    continue
                if any(isinstance(x, ast.Starred) for x in n.args) or any(
                        k.arg is None for k in n.keywords):
                    return False
                seen += 1
                if not any(isinstance(v := binds.get(g, defaults.get(g)), ast.Constant)
                           and bool(v.value) != want for g, want in guards):
                    return False
    return seen > 0


class GraphOpUnderNoGrad(Rule):
    """`retain_grad()` or `register_hook(...)` on a value computed with grad off: inside
    `torch.no_grad()`/`inference_mode()`, or in a function (a helper, a method, a module's
    `forward`) that such a block calls, directly or through other calls of the file.

    Why: with grad off, a module output, a torch op or arithmetic records no graph, so the
    result does not require grad, and `retain_grad()` raises `can't retain_grad on Tensor that
    has requires_grad=False`, `register_hook` `cannot register a hook on a tensor that doesn't
    require gradient` (checked on torch 2.13). The usual shape: a forward or a shared
    forward-and-loss helper keeps an activation's gradient for logging or Grad-CAM, and the
    validation or prediction code runs the same path under `no_grad` (torch-em#57, ALF#1089,
    CLIPasso). Guard it (`if t.requires_grad:`), or keep the gradient bookkeeping out of the
    path the evaluation runs.
    Known limits: the calls must be of this file (helpers, `self.method()`, methods of an
    instance of a class of the file, module classes of the file and the containers built from
    them); a leaf (`nn.Parameter`, `requires_grad=True`) keeps its flag and is not reported.
    """

    code = "GT217"
    name = "graph-op-under-no-grad"
    message = ("`{call}` runs with grad off ({how}): `{value}` is computed there without a "
               "graph, so this raises `{error}`; guard it with `if {value}.requires_grad:` or "
               "keep it out of the code the no-grad block runs")
    triggers = ("retain_grad", "register_hook")
    examples = [
        Bad("""
            import torch
            import torch.nn as nn

            def keep_grad(t):
                t.retain_grad()
                return t

            class Head(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 2)

                def forward(self, x):
                    return keep_grad(self.fc(x))

            head = Head()

            @torch.inference_mode()
            def evaluate(batch):
                return head(batch).argmax(1)
            """, at=(5, 4)),
        Good("""
            import torch
            import torch.nn as nn

            def keep_grad(t):
                if t.requires_grad:
                    t.retain_grad()
                return t

            class Head(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 2)

                def forward(self, x):
                    return keep_grad(self.fc(x))

            head = Head()

            @torch.inference_mode()
            def evaluate(batch):
                return head(batch).argmax(1)
            """),
        Good("""
            import torch

            def probe(model, x):
                with torch.enable_grad():
                    x = x.clone().requires_grad_()
                    out = model(x)
                    out.register_hook(print)
                    out.sum().backward()
                return x.grad

            def validate(model, x):
                with torch.no_grad():
                    return probe(model, x)
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if not (isinstance(f, ast.Attribute) and f.attr in ERRORS):
            return
        fn = ctx.function
        where: ast.AST = fn if fn is not None else ctx.tree
        region = ctx.grad_disabled
        how = None
        made: set[str] = set()
        related: list[Related] = []
        if region is not None:
            is_with = isinstance(region, (ast.With, ast.AsyncWith))
            owner = region if is_with else fn
            nodes = off_list(ctx, owner) if owner is not None else []
            if node not in nodes:
                return
            made = made_names(nodes, where, ctx)
            how = "under `{}`".format(ctx.source(
                region.items[0].context_expr if is_with else region))  # type: ignore[union-attr]
        elif fn is not None:
            entry = grad_off_functions(ctx).get(id(fn))
            if entry is None:
                return
            nodes = off_list(ctx, fn)
            if node not in nodes:
                return
            made = made_names(nodes, fn, ctx, entry.made)
            r = entry.region
            at = next((d for d in getattr(r, "decorator_list", ()) if disables_grad(d, ctx)), r)
            mode = "`{}`".format(ctx.source(r.items[0].context_expr)) if isinstance(
                r, (ast.With, ast.AsyncWith)) else "the grad-off decorator of `{}`".format(
                    r.name)  # type: ignore[attr-defined]
            how = f"`{fn.name}` is reached from {mode} at line {at.lineno}"  # type: ignore[attr-defined]
            related.append(Related(ctx.path, at.lineno, "grad is turned off here",
                                   ctx.column(at)))
            if entry.call is not None and entry.call.lineno != r.lineno:
                related.append(Related(ctx.path, entry.call.lineno, "the call that leads there",
                                       ctx.column(entry.call)))
        if how is None or not computed(f.value, made, where, ctx) or _guarded(ctx):
            return
        if region is None and fn is not None:
            guards = _flag_guards(ctx, fn)
            if guards and _off_calls_pass_other(ctx, fn, guards):
                return
        if _switch_left_off(ctx):
            return
        yield self.report(node, ctx, related=related, call=ctx.source(node),
                          how=how, value=ctx.source(f.value), error=ERRORS[f.attr])
