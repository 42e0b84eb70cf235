"""GT215: a `no_grad` block holds only the freeze's set-up; the calls it was for follow it."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.analysis.reach import disables_grad

# module methods that change a flag and compute nothing
SETUP_METHODS = frozenset({"eval", "train", "requires_grad_", "zero_grad"})
FOLLOWING = 4  # statements after the block that may hold the calls meant to be inside it


def _off(expr: ast.expr, fn: ast.AST, ctx: Context) -> bool:
    """``expr`` turns gradients off: ``torch.no_grad()``, or a name bound in ``fn`` to one
    (also one arm of ``torch.no_grad() if freeze else nullcontext()``)."""
    if disables_grad(expr, ctx):
        return True
    if isinstance(expr, ast.Name):
        b = ctx.scope(fn).binding_before(expr.id, expr.lineno)
        v = b.value if b is not None else None
        return v is not None and disables_grad(v, ctx, maybe=True)
    return False


def _setup_receivers(body: list[ast.stmt]) -> set[str] | None:
    """The modules a block only switches (``m.eval()``); None when it computes anything."""
    out: set[str] = set()
    for s in body:
        if isinstance(s, ast.If):
            got = _setup_receivers([*s.body, *s.orelse])
            if got is None:
                return None
            out |= got
        elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) \
                and isinstance(s.value.func, ast.Attribute) \
                and s.value.func.attr in SETUP_METHODS and dotted(s.value.func.value):
            out.add(dotted(s.value.func.value))  # type: ignore[arg-type]
        elif not isinstance(s, ast.Pass):
            return None
    return out


class NoGradBlockMissesFrozenCalls(Rule):
    """A `with torch.no_grad():` block holds only set-up (`m.eval()`), and the calls of those
    modules it was meant to freeze come right after it, outside.

    Why: `no_grad` applies to what runs inside the `with` body. A block that only switches
    modules to eval mode freezes nothing: the calls that follow it, one indentation level
    out, record a graph, so the modules meant to be frozen get gradients and the optimizer
    (built over all trainable parameters) keeps updating them, silently (RVC-Boss/GPT-SoVITS#1921
    `freeze_quantizer`; checked on torch 2.13). Indent those calls into the block, or freeze
    the modules with `requires_grad_(False)`.
    Known limits: the block must only call `eval()`/`train()`/`requires_grad_()` (under `if`s),
    in `forward` of a module or in a function that calls `backward()`; the call must be on the
    same spelling (`self.proj(x)` after `self.proj.eval()`) within the next few statements.
    """

    code = "GT215"
    name = "no-grad-block-misses-frozen-calls"
    message = ("`{call}` runs after the `with {ctxexpr}:` block (line {line}), which only "
               "switches `{module}` to eval mode: this call records a graph and `{module}` "
               "keeps training; move it into the block")
    triggers = ("no_grad", "inference_mode", "set_grad_enabled")
    gate_statements = "function"
    examples = [
        Bad("""
            import torch
            import torch.nn as nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.frozen = nn.Linear(4, 4)
                    self.head = nn.Linear(4, 1)
                def forward(self, x):
                    with torch.no_grad():
                        self.frozen.eval()
                    h = self.frozen(x)
                    return self.head(h)
            """, at=(11, 8)),
        Good("""
            import torch
            import torch.nn as nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.frozen = nn.Linear(4, 4)
                    self.head = nn.Linear(4, 1)
                def forward(self, x):
                    with torch.no_grad():
                        self.frozen.eval()
                        h = self.frozen(x)
                    return self.head(h)
            """),
    ]

    def visit_With(self, node: ast.With, ctx: Context) -> Iterator[Finding]:
        fn = ctx.function
        if fn is None or len(node.items) != 1:
            return
        mods = _setup_receivers(node.body)
        if not mods or not _off(node.items[0].context_expr, fn, ctx):
            return
        if not (fn.name == "forward" and ctx.class_def is not None) \
                and not ctx.mentions(".backward("):
            return
        after = _following(node, fn)
        for s in after[:FOLLOWING]:
            for n in walk(s):
                if isinstance(n, (*FUNCTION_TYPES, ast.Lambda)):
                    break
                if isinstance(n, ast.Call) and dotted(n.func) in mods:
                    yield self.report(s, ctx, related=[Related(
                        ctx.path, node.lineno, "the block ends before the call",
                        ctx.column(node))], call=ctx.source(n),
                        ctxexpr=ctx.source(node.items[0].context_expr), line=node.lineno,
                        module=dotted(n.func))
                    return


def _following(node: ast.stmt, fn: ast.AST) -> list[ast.stmt]:
    """The statements after ``node`` in the body that holds it."""
    for parent in walk(fn):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(parent, field, None)
            if isinstance(body, list) and node in body:
                return body[body.index(node) + 1:]
    return []
