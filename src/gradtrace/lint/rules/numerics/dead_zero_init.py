"""GT729: a parameter made of zeros that the module only reads through relu or abs."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import of_types, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.numerics._ops import torch_op

# NOTE [flat at zero]
# torch's backward of `relu` at exactly 0 is 0 (`threshold_backward` passes the gradient only
# where the input is > 0; `relu6` likewise), and of `abs` at 0 is `sgn(0) = 0`
# (checked on torch 2.13: `torch.relu(torch.zeros(3, requires_grad=True)).sum().backward()`
# leaves a zero grad, `clamp(min=0)` does not: its backward passes the gradient at the bound).
# A parameter that starts at exactly 0 and is read only through one of these gets a gradient
# of exactly 0 at every step: no optimizer moves it (SGD/Adam steps of a zero gradient are 0,
# and decoupled weight decay of 0 is 0), so it stays 0 for ever, silently.
FLAT_AT_ZERO = frozenset({"relu", "relu_", "relu6", "abs", "absolute"})
ZERO_FACTORIES = frozenset({"torch.zeros", "torch.zeros_like"})


def _zeros(e: ast.expr | None, ctx: Context) -> bool:
    return isinstance(e, ast.Call) and ctx.call_name(e) in ZERO_FACTORIES


def _flat_reads(cls: ast.ClassDef, attr: str, ctx: Context) -> dict[int, tuple[str, ast.AST]]:
    """``id(read) -> (op, read)`` for every ``self.<attr>`` of the class that is the operand of
    relu/abs (``F.relu(n)``, ``n.abs()``, ``abs(n)``): one walk over the class's calls."""
    def mine(n: ast.AST) -> bool:
        return isinstance(n, ast.Attribute) and n.attr == attr \
            and isinstance(n.value, ast.Name) and n.value.id == "self"
    out: dict[int, tuple[str, ast.AST]] = {}
    for call in of_types(cls, (ast.Call,)):
        f = call.func
        if isinstance(f, ast.Attribute) and mine(f.value) and not call.args \
                and f.attr in FLAT_AT_ZERO:
            out[id(f.value)] = (f.attr, f.value)
        elif call.args and mine(call.args[0]):
            n = call.args[0]
            if isinstance(f, ast.Name) and f.id == "abs" and not ctx.imports.is_imported("abs"):
                out[id(n)] = ("abs", n)
                continue
            got = torch_op(call, ctx)
            if got is not None and got[1] is n and got[0] in FLAT_AT_ZERO and not (
                    call.keywords or len(call.args) > 1):
                out[id(n)] = (got[0], n)
    return out


class ParameterStartsFlatAtZero(Rule):
    """A parameter initialised to zeros is read only through `relu` (or `abs`): its gradient is
    exactly 0 at every step and it never moves.

    Why: torch's `relu` and `abs` have a gradient of exactly 0 at 0 (NOTE [flat at zero]), so
    `self.gamma = nn.Parameter(torch.zeros(n))` used as `F.relu(self.gamma) + eps` gets a zero
    gradient forever and the optimizer never changes it (pyro's `BatchNorm` flow before PR
    #2459: the scale stayed at 1e-6 and only the shift learned). Start it away from the kink
    (`torch.ones(n)`), or use a map with a gradient at 0 (`F.softplus`, `exp`).
    Known limits: the parameter is a `self.<attr>` of a module class, assigned once (no
    `nn.init` or `.data` write, no other read), built from `torch.zeros`/`zeros_like`, and
    every read of it in the class is the operand of `relu`/`relu6`/`abs`.
    """

    code = "GT729"
    name = "parameter-starts-flat-at-zero"
    message = ("`self.{attr}` starts at zeros and is only read through `{op}`, whose gradient at "
               "0 is exactly 0: it gets a zero gradient at every step and never moves; start it "
               "away from 0 or use a map with a gradient there (`softplus`, `exp`)")
    triggers = ("zeros",)
    # the parameter is made in one of the class's methods: its `zeros` is on the class's lines
    gate_statements = True
    examples = [
        Bad("""
            import torch
            from torch import nn
            import torch.nn.functional as F
            class Scale(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.gamma = nn.Parameter(torch.zeros(n))
                def forward(self, x):
                    return x * (F.relu(self.gamma) + 1e-6)
            """, at=(7, 8)),
        Good("""
            import torch
            from torch import nn
            import torch.nn.functional as F
            class Scale(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.gamma = nn.Parameter(torch.zeros(n))
                def forward(self, x):
                    return x * (F.softplus(self.gamma) + 1e-6)
            """),
        Good("""
            import torch
            from torch import nn
            import torch.nn.functional as F
            class Scale(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.gamma = nn.Parameter(torch.zeros(n))
                    self.reset_parameters()
                def reset_parameters(self):
                    nn.init.ones_(self.gamma)
                def forward(self, x):
                    return x * F.relu(self.gamma)
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        cls = ctx.analysis.classes.get(node.name)
        if cls is None or not cls.is_module or cls.node is not node:
            return
        for attr, info in cls.attrs.items():
            v = info.value
            if info.later or info.buffer or not (
                    isinstance(v, ast.Call) and ctx.call_name(v) == "torch.nn.Parameter"
                    and v.args and _zeros(v.args[0], ctx)) \
                    or any(k.arg == "requires_grad" for k in v.keywords):
                continue
            op = self._only_flat(node, attr, info.stmt, ctx)
            if op is None:
                continue
            yield self.report(info.stmt, ctx, related=(Related(
                ctx.path, op[1].lineno, f"`self.{attr}` is read through `{op[0]}` here",
                ctx.column(op[1])),), attr=attr, op=op[0])

    @staticmethod
    def _only_flat(cls: ast.ClassDef, attr: str, made: ast.stmt, ctx: Context
                   ) -> tuple[str, ast.AST] | None:
        """The first read's op when every read of ``self.<attr>`` in the class (outside its
        assignment ``made``) is a relu/abs operand; None when one is not, or none is read."""
        flat = _flat_reads(cls, attr, ctx)
        inside = {id(x) for x in walk(made)}
        first: tuple[str, ast.AST] | None = None
        for n in walk(cls):
            if not (isinstance(n, ast.Attribute) and n.attr == attr
                    and isinstance(n.value, ast.Name) and n.value.id == "self") \
                    or id(n) in inside:
                continue
            op = flat.get(id(n)) if isinstance(n.ctx, ast.Load) else None
            if op is None:
                return None
            first = first or op
        return first
