"""GT423: an all-zeros plain tensor attribute that ``forward`` multiplies by: a parameter that
was never registered."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.registration._unused import _bases_seen
from gradtrace.lint.rules.registration.attributes import TENSOR_MOVES, _made_trainable

ZEROS = frozenset({"torch.zeros", "torch.zeros_like"})


def _zeros(value: ast.expr | None, ctx: Context) -> bool:
    """``torch.zeros(...)`` (also ``.to(dev)``, ``.float()``), not asking for grad."""
    e = value
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr in TENSOR_MOVES:
        e = e.func.value
    return isinstance(e, ast.Call) and ctx.call_name(e) in ZEROS \
        and not any(k.arg == "requires_grad" for k in e.keywords)


def _self_attr(e: ast.AST) -> str | None:
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
        return e.attr
    return None


class ZeroFactorAsPlainAttribute(Rule):
    """An all-zeros tensor attribute that `forward` multiplies by is a plain tensor: it never
    trains, and the product stays zero.

    Why: `self.alpha = torch.zeros(n)` in `__init__` stores an ordinary tensor, not an
    `nn.Parameter` (NOTE [registration]), so `parameters()` leaves it out and no optimizer
    ever changes it. A constant factor of zeros makes `self.alpha * h` zero forever: the term
    only means something if `alpha` learns (Dice's and PReLU's slope, SAGAN's `gamma`).
    Verified on torch 2.13: after Adam steps the tensor is still all zeros. Wrap it,
    `nn.Parameter(torch.zeros(n))`.
    Known limits: every assignment of the attribute is `torch.zeros(...)` in `__init__` of an
    `nn.Module` class of the file whose bases are `nn.Module` or classes of the file; the file never writes into an attribute of that name
    (assigned, indexed, in place, `.data`), never makes it require grad nor names it in a
    string, and the class multiplies by it (`self.a * x`, `x * self.a`); the file runs
    `backward()`.
    """

    code = "GT423"
    needs_step = True  # NOTE [step files]
    gate_statements = True
    name = "zero-factor-as-plain-attribute"
    message = ("`self.{attr}` is a plain all-zeros tensor that `{cls}` multiplies by (line "
               "{line}): it is not in `parameters()`, so it never trains and the product stays "
               "zero; make it `nn.Parameter(...)`")
    triggers = ("zeros",)
    examples = [
        Bad("""
            import torch
            import torch.nn as nn
            class Dice(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.bn = nn.BatchNorm1d(n)
                    self.alpha = torch.zeros((n,)).to("cpu")
                def forward(self, x):
                    p = torch.sigmoid(self.bn(x))
                    return self.alpha * (1 - p) * x + p * x
            net = Dice(4)
            net(torch.randn(8, 4)).sum().backward()
            """, at=(7, 8)),
        Good("""
            import torch
            import torch.nn as nn
            class Dice(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.bn = nn.BatchNorm1d(n)
                    self.alpha = nn.Parameter(torch.zeros((n,)))
                    self.count = torch.zeros(1)
                    self.mask = torch.zeros(n)
                def forward(self, x):
                    self.count += 1
                    self.mask[0] = 1.0
                    p = torch.sigmoid(self.bn(x))
                    return self.alpha * (1 - p) * x + p * x * self.count + self.mask * x
            net = Dice(4)
            net(torch.randn(8, 4)).sum().backward()
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        if not ctx.mentions(".backward("):
            return
        for cls in ctx.analysis.classes.values():
            init = cls.methods.get("__init__")
            if not cls.is_module or init is None or not _bases_seen(cls.node, ctx, set()):
                continue  # a base of another file may register or write it
            in_init = {id(s) for s in walk(init)}
            zeros = {name: info for name, info in cls.attrs.items()
                     if info.method is init and not info.buffer and _zeros(info.value, ctx)
                     and all(id(s) in in_init and _zeros(getattr(s, "value", None), ctx)
                             for s in info.later)}
            if zeros:
                yield from self._factors(cls, zeros, ctx)

    def _factors(self, cls, zeros, ctx: Context) -> Iterator[Finding]:  # type: ignore[no-untyped-def]
        factor: dict[str, ast.AST] = {}
        for n in walk(cls.node):
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult):
                for o in (n.left, n.right):
                    b = _self_attr(o)
                    if b in zeros and b not in factor:
                        factor[b] = n
        if not factor:
            return
        inits = {id(s) for info in zeros.values() for s in (info.stmt, *info.later)}
        bad = _made_trainable(ctx, set(factor)) | {
            a for a in factor if f"'{a}'" in ctx.text or f'"{a}"' in ctx.text}
        for n in walk(ctx.tree):  # a write into it anywhere, or a read of its grad or data
            if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and id(n) not in inits:
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                    for x in walk(t):
                        if isinstance(x, ast.Attribute):
                            bad.add(x.attr)
            elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute) \
                    and n.value.attr in factor and (n.attr.endswith("_") or n.attr in (
                        "data", "grad", "requires_grad", "register_hook")):
                bad.add(n.value.attr)
        for a, info in zeros.items():
            if a in factor and a not in bad:
                use = factor[a]
                first = min((info.stmt, *info.later), key=lambda s: s.lineno)
                yield self.report(first, ctx, related=(Related(
                    ctx.path, use.lineno, f"`self.{a}` multiplies here",  # type: ignore[attr-defined]
                    ctx.column(use)),), attr=a, cls=cls.name, line=use.lineno)  # type: ignore[attr-defined]
