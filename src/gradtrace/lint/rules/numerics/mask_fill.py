"""GT770: a mask fill on the wrong side of a softmax, or with a value that does not mask."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.analysis.instance_calls import passed_values
from gradtrace.lint.rules.numerics._ops import strip, torch_op
from gradtrace.lint.rules.numerics.inf_fill import (
    _fill, _sign_of_inf, softmax_reading)
from gradtrace.lint.rules.numerics.softmax import _softmax

LARGE = 1e4  # a fill at or below -LARGE is meant as "minus infinity"


def _number(e: ast.AST, ctx: Context) -> float | None:
    """The value of a numeric constant, its negation, or a parameter of the enclosing
    function read with its default (``e=1e-12`` ... ``-e``); None otherwise."""
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
        v = _number(e.operand, ctx)
        return None if v is None else (-v if isinstance(e.op, ast.USub) else v)
    if isinstance(e, ast.Constant) and isinstance(e.value, (int, float)) \
            and not isinstance(e.value, bool):
        return float(e.value)
    fn = ctx.function
    if isinstance(e, ast.Name) and isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        if ctx.scope(fn).binding_before(e.id, e.lineno) is not None:
            return None  # rebound in the body
        a = fn.args
        pos = [*a.posonlyargs, *a.args]
        defaults = dict(zip([x.arg for x in pos[len(pos) - len(a.defaults):]], a.defaults))
        defaults.update((x.arg, d) for x, d in zip(a.kwonlyargs, a.kw_defaults)
                        if d is not None)
        d = defaults.get(e.id)
        return _number(d, ctx) if isinstance(d, (ast.Constant, ast.UnaryOp)) else None
    return None


def _is_probabilities(e: ast.AST, ctx: Context, line: int) -> ast.Call | None:
    """The ``softmax`` call (not ``log_softmax``) whose output ``e`` is, directly or through
    the name it is bound to in the same function."""
    e = strip(e)
    if isinstance(e, ast.Name):
        b = ctx.scope().binding_before(e.id, line)
        if b is None or not isinstance(b.stmt, ast.Assign) or b.value is None:
            return None
        e = strip(b.value)
    if not isinstance(e, ast.Call):
        return None
    got = torch_op(e, ctx)
    if got is not None and got[0] == "softmax":
        return e
    if got is None and _softmax(e, ctx) is not None and "log" not in ctx.source(e.func).lower():
        return e
    return None


class MaskFillMissesSoftmax(Rule):
    """A mask fill that does not take the masked positions out of a softmax: the scores are
    filled with a number close to 0 (`-1e-12`), or the softmax's output is filled with
    `-inf` instead of its input.

    Why: a masked score must be very negative before the softmax so that `exp` gives it a
    weight of 0. Filled with `-1e-12` (an epsilon written where `-1e12` was meant), the
    masked position scores about 0 and keeps a full share of every row's weight; the padded
    keys are attended and trained on (checked on torch 2.13). Filled after the softmax, the
    probabilities become `-inf` where they should be 0: the weighted sum that reads them is
    `-inf`/NaN, and so are the loss and every gradient (timm EVA). Fill the scores before the
    softmax with `float('-inf')` or `torch.finfo(x.dtype).min`, or multiply the
    probabilities by the mask.
    Scores multiplied by a 0/1 mask before the softmax (`a = a * mask; softmax(a)`) are
    masked the same wrong way: a masked score becomes exactly 0, and `exp(0)` keeps its full
    share of the weight (Attention-MIL pooling giving padded instances 0.44 of the attention,
    checked on torch 2.13). The mask is read as 0/1 when it is a comparison, `.bool()`, `~m`,
    a cast of one, or a `forward` parameter every call passes such a tensor (or a tensor of
    True/False literals) for.
    Known limits: `masked_fill` / `masked_fill_` with a constant (or a parameter's default),
    the softmax in the same function; a fill after `log_softmax` (log-probabilities) is
    left alone. The softmax must be spelled so (`F.softmax`, `x.softmax`, `self.softmax`, an
    `nn.Softmax(...)` built in place). A multiplied mask must be a factor of the softmax's input or of the one
    assignment that makes it in the same function.
    """

    code = "GT770"
    name = "mask-fill-misses-softmax"
    message = "`{fill}` {what}"
    triggers = ("masked_fill", "softmax")
    gate_statements = True
    TINY = ("fills the masked scores with {value}, about 0: after the softmax at line {line} "
            "every masked position keeps the weight of a score of 0, so it is attended and "
            "trained on; fill with float('-inf') or torch.finfo(x.dtype).min")
    TIMES = ("multiplies the scores by the 0/1 mask `{mask}` before the softmax at line {line}: "
             "a masked score becomes 0, not minus infinity, and keeps the weight exp(0) of a "
             "real one, so masked positions are attended and trained on; fill them instead: "
             "`.masked_fill(~mask, float('-inf'))`")
    AFTER = ("fills the output of the softmax at line {line} (probabilities) with {value}: "
             "what reads them is -inf/NaN, and so are the loss and the gradients; fill the "
             "scores before the softmax, or multiply the probabilities by the mask")
    examples = [
        Bad("""
            import torch

            def attend(q, k, v, keep, eps=1e-9):
                scores = q @ k.transpose(-2, -1)
                scores = scores.masked_fill(keep == 0, -eps)
                return scores.softmax(dim=-1) @ v
            """, at=(5, 13)),
        Bad("""
            import torch

            def attend(q, k, v, keep):
                w = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
                w = w.masked_fill(~keep, float("-inf"))
                return w @ v
            """, at=(5, 8)),
        Good("""
            import torch

            def attend(q, k, v, keep):
                scores = q @ k.transpose(-2, -1)
                scores = scores.masked_fill(keep == 0, -1e9)
                w = scores.softmax(dim=-1)
                w = w.masked_fill(keep == 0, 0.0)
                return w @ v
            """),
        Good("""
            import torch

            def token_log_probs(logits, allowed):
                lp = torch.log_softmax(logits, dim=-1)
                return lp.masked_fill(~allowed, float("-inf"))
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        got = _fill(node, ctx)
        if got is None:
            yield from self._multiplied(node, ctx)
            return
        filled, value = got
        v = _number(value, ctx)
        fill = " ".join(ctx.source(node).split())[:60]
        shown = ctx.source(value) if v is None or isinstance(value, ast.Constant) or (
            isinstance(value, ast.UnaryOp) and isinstance(value.operand, ast.Constant)) \
            else f"{ctx.source(value)} ({v:g})"
        if v is not None and -1.0 < v < 0.0:
            sm = softmax_reading(node, strip(filled), ctx)
            if sm is not None:
                yield self.report(node, ctx, fill=fill, what=self.TINY.format(
                    value=shown, line=sm.lineno), related=[Related(
                        ctx.path, sm.lineno, "the softmax that reads the filled scores",
                        ctx.column(sm))])
            return
        if _sign_of_inf(value, ctx) == -1 or (v is not None and v <= -LARGE):
            sm = _is_probabilities(filled, ctx, node.lineno)
            if sm is not None:
                yield self.report(node, ctx, fill=fill, what=self.AFTER.format(
                    value=shown, line=sm.lineno), related=[Related(
                        ctx.path, sm.lineno, "the softmax whose output is filled",
                        ctx.column(sm))])

    def _multiplied(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        """A softmax whose input is scores times a 0/1 mask (directly, or by the assignment
        that makes the name it reads)."""
        f = node.func
        spelled = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(
            f, ast.Name) else "softmax" if isinstance(f, ast.Call) else ""
        if "softmax" not in spelled.lower():
            return  # (cheap: a softmax spelled so, or a module built in place)
        op = torch_op(node, ctx)
        if op is not None and op[0] != "softmax":
            return
        if op is None:
            if _softmax(node, ctx) is None or not node.args or \
                    "log" in ctx.source(node.func).lower():
                return
            op = ("softmax", node.args[0])
        e, where = strip(op[1]), node
        if isinstance(e, ast.Name):
            b = ctx.scope().binding_before(e.id, node.lineno)
            if b is None or not isinstance(b.stmt, ast.Assign) or b.value is None:
                return
            e, where = strip(b.value), b.stmt
        if not (isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult)):
            return
        for factor in (e.left, e.right):
            if _zero_one(factor, ctx, where.lineno):
                yield self.report(where, ctx, fill=" ".join(ctx.source(e).split())[:60],
                                  what=self.TIMES.format(mask=ctx.source(factor)[:30],
                                                         line=node.lineno),
                                  related=[Related(ctx.path, node.lineno,
                                                   "the softmax that reads the scores",
                                                   ctx.column(node))])
                return


CASTS = frozenset({"float", "half", "double", "to", "type_as", "long", "int", "unsqueeze",
                   "view", "expand_as", "view_as", "reshape"})


def _zero_one(e: ast.AST, ctx: Context, line: int, depth: int = 0) -> bool:
    """Whether ``e`` is a 0/1 (boolean) tensor: a comparison, ``~m``, ``.bool()``, a cast or a
    view of one, a local name bound to one, or a parameter of a module's ``forward`` that
    every call of an instance passes one for (read in the caller)."""
    if depth > 3:
        return False
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in CASTS:
        e = e.func.value
    if isinstance(e, ast.Compare) or isinstance(e, ast.UnaryOp) and \
            isinstance(e.op, ast.Invert):
        return True
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "bool":
        return True
    if not isinstance(e, ast.Name):
        return False
    fn = ctx.function
    b = ctx.scope().binding_before(e.id, line)
    if b is not None:
        return b.value is not None and isinstance(b.stmt, ast.Assign) and \
            _zero_one(b.value, ctx, b.line, depth + 1)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    got = passed_values(ctx, fn, e.id)
    return bool(got) and all(_bool_value(v, w, ctx) for v, w in got)  # type: ignore[union-attr]


def _bool_value(v: ast.expr, where: ast.AST, ctx: Context, depth: int = 0) -> bool:
    """Whether the value a caller passes is a boolean tensor: a comparison, ``.bool()``,
    ``torch.tensor`` of True/False literals, or a name of the caller bound to one."""
    if depth > 3:
        return False
    if isinstance(v, ast.Compare) or isinstance(v, ast.Call) and \
            isinstance(v.func, ast.Attribute) and v.func.attr == "bool":
        return True
    if isinstance(v, ast.Call) and (ctx.qualified_name(v.func) or "") == "torch.tensor" \
            and v.args:
        consts = [x for n in ast.walk(v.args[0]) if isinstance(n, (ast.List, ast.Tuple))
                  for x in n.elts if isinstance(x, ast.Constant)]  # (`[True] * 6`: 6 is no item)
        return bool(consts) and all(isinstance(c.value, bool) for c in consts)
    if isinstance(v, ast.Name):
        b = ctx.scope(where).binding_before(v.id, v.lineno)  # type: ignore[arg-type]
        return b is not None and b.value is not None and isinstance(b.stmt, ast.Assign) and \
            _bool_value(b.value, where, ctx, depth + 1)
    return False
