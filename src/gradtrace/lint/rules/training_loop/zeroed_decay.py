"""GT552: gradients zeroed to keep entries fixed, stepped by an optimizer with weight decay."""
from __future__ import annotations

import ast
import re
from typing import Iterator

import dataclasses

from gradtrace.findings import Finding
from gradtrace.lint.analysis.detached_rows import detached_rows
from gradtrace.lint.analysis.kinds import OPTIMIZER
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import function_scopes, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.training_loop._base import LoopRule, related_at
from gradtrace.lint.rules.training_loop._loop import LoopFacts, Step
from gradtrace.lint.rules.training_loop._zero_hooks import decayed_optimizers, zeroing_hooks

# an indexed gradient, or one bound to a name (`g = w.grad` ends its line): the file test
GRAD_WRITE_RE = re.compile(r"\.grad(?:\.data)?\s*\[|\.grad(?:\.data)?[ \t]*$", re.MULTILINE)


def _is_zero(e: ast.AST | None) -> bool:
    if isinstance(e, ast.Constant) and e.value == 0 and not isinstance(e.value, bool):
        return True
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
        if e.func.attr == "zero_":
            return True
        if e.func.attr == "fill_" and e.args and _is_zero(e.args[0]):
            return True
    return False


def _grad_chain(e: ast.AST, f: LoopFacts, line: int) -> bool:
    """``e`` reads a ``.grad`` (``p.grad[i]``, ``w.grad.data``), or a name bound to one."""
    for n in walk(e):
        if isinstance(n, ast.Attribute) and n.attr == "grad":
            return True
        if isinstance(n, ast.Name):
            b = f.scope.binding_before(n.id, line)
            if b is not None and isinstance(b.value, ast.Attribute) and b.value.attr == "grad":
                return True
    return False


def _zeroes_grad(s: ast.stmt, f: LoopFacts) -> bool:
    """``s`` zeroes part of a gradient: ``g[idx] = 0``, ``g.data[m, :] = ....fill_(0)``,
    ``p.grad[m].zero_()``."""
    if isinstance(s, ast.Assign) and len(s.targets) == 1 \
            and isinstance(s.targets[0], ast.Subscript):
        return _grad_chain(s.targets[0], f, s.lineno) and _is_zero(s.value)
    if isinstance(s, ast.Expr) and _is_zero(s.value):
        return isinstance(s.value.func.value, ast.Subscript) \
            and _grad_chain(s.value.func.value, f, s.lineno)  # type: ignore[attr-defined]
    return False


def _decay(call: ast.Call, ctx: Context) -> str | None:
    """How the optimizer built by ``call`` decays weights: ``weight_decay=<x>`` with x a
    non-zero literal, or AdamW's default (0.01)."""
    for k in call.keywords:
        if k.arg == "weight_decay":
            v = k.value
            if isinstance(v, ast.Constant) and isinstance(v.value, (int, float)) and v.value:
                return f"weight_decay={v.value}"
            return None
    q = ctx.qualified_name(call.func) or ""
    if q == "torch.optim.AdamW" and len(call.args) <= 1:
        return "AdamW's default weight_decay=0.01"
    return None


def _restores(f: LoopFacts, s: Step, loop: ast.stmt) -> bool:
    """A statement after the step, in the loop, writes parameter values back
    (``w.data[i] = orig[i]``, ``w.copy_(...)``)."""
    for t in f.within(loop):
        if t.lineno <= s.stmt.lineno:
            continue
        for n in walk(t):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr == "copy_" and not _grad_chain(n.func.value, f, t.lineno):
                return True
        if isinstance(t, ast.Assign) and any(
                isinstance(x, ast.Subscript) and not _grad_chain(x, f, t.lineno)
                for x in t.targets):
            return True
    return False


class ZeroedGradientsStillDecayed(Rule):
    """Part of a gradient is zeroed between `backward()` and `step()` to keep those entries
    fixed, but the optimizer has weight decay: the entries still move.

    Why: zeroing `grad[rows]` only removes the loss's pull. AdamW (decoupled decay, 0.01 by
    default) multiplies every held parameter by `1 - lr * weight_decay` at each step, and
    SGD/Adam with `weight_decay` add `weight_decay * p` to the gradient, so the "frozen" rows
    shrink toward zero step after step (diffusers' textual inversion, which zeroed the
    gradients of every embedding row but the new token's under AdamW; checked on torch 2.13).
    Restore the rows after each step (`w.data[rows] = orig[rows]`), give the optimizer
    `weight_decay=0`, or train a separate parameter.
    A gradient hook that returns zeros (`p.register_hook(lambda g: torch.zeros_like(g))`, a
    masking `g.masked_fill(m, 0)`) keeps the same entries fixed and is decayed the same way
    (NOTE [zeroing hook]; pytorch#38581). So does a module method that keeps some slices of
    a Parameter fixed by joining their `.detach()` with a live slice in one `torch.cat`
    (sd-scripts' DyLoRA, a textual inversion keeping the old token rows): the fixed entries
    get a zero gradient, not None, and are decayed; reported at the Parameter (or its layer)
    when the file builds the class and an optimizer with weight decay
    (NOTE [rows detached in forward]).
    Known limits: one function or script: the zeroing is a write of 0 into an indexed gradient
    (`g[idx] = 0`, `.fill_(0)`, `.zero_()`); the optimizer's construction must show the decay
    (a literal `weight_decay`, or AdamW without one); a subscripted write or `copy_` after the
    step counts as restoring. A hook is paired with an optimizer over `<model>.parameters()`
    by the model's name (or the name a helper's caller hands it), not by flow.
    """

    code = "GT552"
    name = "zeroed-gradients-still-decayed"
    message = ("`{opt}` has {decay}: the entries whose gradient is zeroed at line {line} still "
               "shrink at every step; restore them after the step or use weight_decay=0")
    gate_statements = "function"
    triggers = (".grad", "register_hook", "].detach()")
    function_needs = ("backward", "step", ".grad")
    _entry = LoopRule._entry
    wants = LoopRule.wants

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        """One visit per file: an indexed gradient spelled somewhere, then each function (and
        the script's own statements) as the other training-loop rules read them."""
        if ctx.mentions("register_hook"):
            yield from self._hooked(ctx)
        if "].detach()" in ctx.code:  # a slice detached (NOTE [rows detached in forward])
            yield from self._detached(ctx)
        if GRAD_WRITE_RE.search(ctx.code) is None:
            return
        for fn in function_scopes(node):
            yield from self._entry(fn, ctx)

    def _hooked(self, ctx: Context) -> Iterator[Finding]:
        """An optimizer with weight decay over a model whose parameters carry a zeroing
        gradient hook (NOTE [zeroing hook])."""
        hooks = zeroing_hooks(ctx)
        if not hooks:
            return
        for opt, model, decay in decayed_optimizers(ctx, _decay):
            h = next((c for c, m in hooks if m == model), None)
            if h is not None:
                yield self.report(opt, ctx, related=(
                    related_at(ctx, h, "this hook zeroes the gradient"),),
                    opt=ctx.source(opt.func), decay=decay, line=h.lineno)

    def _detached(self, ctx: Context) -> Iterator[Finding]:
        """A Parameter whose rows a method of its class detaches, the class built into the
        model an optimizer with weight decay is given (NOTE [rows detached in forward])."""
        rows = detached_rows(ctx)
        if not rows:
            return
        for r in rows:
            got = _decayed_holder(r.cls, ctx)
            if got is None:
                continue
            opt, decay = got
            f = self.report(r.made, ctx, related=(
                related_at(ctx, r.detach, f"`{r.tensor}` is partly detached here: its other "
                           "rows alone get a gradient"),
                related_at(ctx, opt, "this optimizer decays every row")),
                opt=ctx.source(opt.func), decay=decay, line=r.detach.lineno)
            yield dataclasses.replace(f, message=DETACHED_MESSAGE.format(
                t=r.tensor, line=r.detach.lineno, opt=ctx.source(opt.func), decay=decay))

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        yield from _check(self, f, ctx)
    examples = [
        Bad("""
            import torch
            emb = torch.nn.Embedding(10, 4)
            opt = torch.optim.AdamW(emb.parameters(), lr=1e-3)
            for ids in batches:
                emb(ids).pow(2).sum().backward()
                emb.weight.grad[:9] = 0
                opt.step()
                opt.zero_grad()
            """, at=(3, 6)),
        Bad("""
            import torch
            for p in encoder.parameters():
                p.register_hook(lambda g: torch.zeros_like(g))
            opt = torch.optim.SGD(encoder.parameters(), lr=0.1, weight_decay=1e-4)
            """, at=(4, 6)),
        Good("""
            import torch
            for p in encoder.parameters():
                p.register_hook(lambda g: torch.zeros_like(g))
            opt = torch.optim.SGD(encoder.parameters(), lr=0.1)
            """),
        Good("""
            import torch
            emb = torch.nn.Embedding(10, 4)
            opt = torch.optim.AdamW(emb.parameters(), lr=1e-3, weight_decay=0.0)
            for ids in batches:
                emb(ids).pow(2).sum().backward()
                emb.weight.grad[:9] = 0
                opt.step()
                opt.zero_grad()
            """),
    ]


def _decayed_holder(cls: str, ctx: Context) -> tuple[ast.Call, str] | None:
    """(optimizer, its decay): a ``torch.optim`` optimizer with weight decay given
    ``<m>.parameters()`` where ``m`` is bound in the file to a value that builds ``cls``
    (``m = Cls(...)``, ``network = nn.ModuleList([Cls(...) for ...])``)."""
    held: set[str] = set()
    for n in walk(ctx.tree):
        if isinstance(n, ast.Assign) and any(
                isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == cls
                for c in walk(n.value)):
            held |= {d for t in n.targets if (d := dotted(t))}
    if not held:
        return None
    for n in walk(ctx.tree):
        if not (isinstance(n, ast.Call) and n.args
                and (ctx.qualified_name(n.func) or "").startswith("torch.optim.")):
            continue
        owners = {dotted(c.func.value) for c in walk(n.args[0]) if isinstance(c, ast.Call)
                  and isinstance(c.func, ast.Attribute)
                  and c.func.attr in ("parameters", "named_parameters")}
        decay = _decay(n, ctx) if owners & held else None
        if decay is not None:
            return n, decay
    return None


DETACHED_MESSAGE = (
    "`{t}` is kept partly fixed by `.detach()` of some of its slices (line {line}), but "
    "those entries get a zero gradient, not None, and `{opt}` has {decay}: they still shrink at every "
    "step; keep the fixed rows in a tensor of their own, or use weight_decay=0")


def _check(rule: Rule, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
    acc = [b for b in f.backwards if b.accumulates]
    if not acc or not f.steps:
        return
    said: set[int] = set()
    for s in f.steps:
        loops = f.loops_of(s.stmt)
        if not loops:
            continue
        z = next((t for t in f.within(loops[-1]) if _zeroes_grad(t, f) and f.before(
            t, s.stmt) and any(f.before(b.stmt, t) for b in acc)), None)
        if z is None or _restores(f, s, loops[-1]):
            continue
        recv = s.call.func.value if isinstance(s.call.func, ast.Attribute) \
            and s.scaler is None else None
        k = ctx.analysis.kind(recv, f.scope, s.stmt.lineno) if recv is not None else None
        node = k.node if k is not None and k.what == OPTIMIZER else None
        if not isinstance(node, ast.Call) or id(node) in said:
            continue
        decay = _decay(node, ctx)
        if decay is None:
            continue
        said.add(id(node))
        yield rule.report(node, ctx, related=(
            related_at(ctx, z, "the gradient is zeroed here"),),
            opt=dotted(recv) or s.optimizer, decay=decay, line=z.lineno)
