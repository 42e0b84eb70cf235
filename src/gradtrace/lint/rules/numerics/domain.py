"""GT752-GT754: singular ops fed exactly their singular point, or guarded on the output side."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.dropped_returns import dropped_element
from gradtrace.lint.analysis.metric_reads import returned_as_metric
from gradtrace.lint.analysis.selectors import only_selects
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.numerics._ops import (
    _callers, carries_graph, has_positive_shift, in_training, input_feature, resolve, strip,
    torch_op)
from gradtrace.lint.rules.numerics._zeros import (
    DISTANCE, FLOOR, MSE, SINE, VARIANCE, zero_at_coincidence,
)
from gradtrace.lint.rules.numerics._bounds import CLAMPS, bounds, num
from gradtrace.lint.nodes import bfs_walk, walk
from gradtrace.lint.excerpt import excerpt

ARC = frozenset({"acos", "arccos", "asin", "arcsin"})
ROOTS = frozenset({"sqrt"})
LOGS = frozenset({"log", "log2", "log10"})
RECIPROCALS = frozenset({"rsqrt", "reciprocal"})


def _clamped_to_one(e: ast.AST, ctx: Context) -> ast.Call | None:
    """The clamp that bounds ``e`` to exactly +-1 (``clamp(-1, 1)``, ``clamp(max=1)``)."""
    e = strip(e)
    if not isinstance(e, ast.Call):
        return None
    b = bounds(e, ctx)
    if b is None or b[0] not in CLAMPS:
        return None
    lo, hi = num(b[1]), num(b[2])
    return e if lo == -1.0 or hi == 1.0 else None


class ArcCosineAtClampBound(Rule):
    """`torch.acos(cos.clamp(-1, 1))`: the clamp keeps the value defined, not the gradient.

    Why: d/dx acos(x) = -1/sqrt(1 - x^2) is infinite at x = +-1 (asin likewise). Clamping to
    exactly [-1, 1] sends every cosine that rounds to 1 (two equal directions, a prediction
    that matches its target) to the point where the derivative is infinite, and values clamped
    from outside get `0 * inf` = NaN: the weights become NaN (pytorch/pytorch#8069, checked on
    torch 2.13). Clamp to `[-1 + eps, 1 - eps]` (eps about 1e-7 in float32), or use
    `torch.atan2(sin, cos)`.
    Known limits: the clamp must be in the `acos` call or bound to the name it reads in the
    same function.
    """

    code = "GT752"
    name = "arc-cosine-at-clamp-bound"
    message = ("`{call}` reads a value clamped to exactly +-1 (line {line}): the derivative of "
               "`{op}` is infinite there, so a cosine that reaches 1 gives inf/NaN gradients; "
               "clamp to `[-1 + eps, 1 - eps]` instead")
    triggers = ("acos", "arccos", "asin", "arcsin")
    gate_statements = True
    examples = [
        Bad("""
            import torch
            import torch.nn.functional as F

            def angle_loss(pred, target):
                cos = F.cosine_similarity(pred, target, dim=1).clamp(min=-1, max=1)
                return torch.acos(cos).mean()
            """, at=(6, 11)),
        Bad("""
            import torch

            def geodesic_loss(R1, R2):
                tr = (R1.transpose(-1, -2) @ R2).diagonal(dim1=-2, dim2=-1).sum(-1)
                return ((tr - 1) / 2).clamp(-1.0, 1.0).acos()
            """, at=(5, 11)),
        Good("""
            import torch
            import torch.nn.functional as F

            def angle_loss(pred, target, eps=1e-7):
                cos = F.cosine_similarity(pred, target, dim=1).clamp(-1 + eps, 1 - eps)
                return torch.acos(cos).mean()
            """),
        Good("""
            import torch

            @torch.no_grad()
            def angle_error(pred, target):
                return torch.acos((pred * target).sum(-1).clamp(-1, 1))
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        got = torch_op(node, ctx)
        if got is None or got[0] not in ARC or not in_training(ctx, node):
            return
        clamp = _clamped_to_one(got[1], ctx) or _clamped_to_one(
            resolve(strip(got[1]), ctx, node.lineno), ctx)
        if clamp is None or not carries_graph(ctx, got[1], node) \
                or only_selects(ctx.scope(), node):
            return  # `acos(clamp(1 - d.detach(), -1, 1))` for a log, or only its size read
        yield self.report(node, ctx, call=ctx.source(node), op=got[0].replace("arc", "a"),
                          line=clamp.lineno)


class SqrtOfPossibleZero(Rule):
    """`torch.sqrt(((a - b) ** 2).sum(-1))` or `torch.sqrt(1 - c ** 2)` without an epsilon.

    Why: the derivative of sqrt at 0 is infinite. A hand-written distance is exactly 0 when
    the two points coincide (a collapsed edge, a point with itself in a pairwise matrix) and
    its gradient is `inf * 0` = NaN; `sqrt(1 - cos**2)` is 0 when the cosine reaches +-1 (a
    feature on its class centre in ArcFace) and its gradient is infinite
    (akanazawa/cmr#11, ronghuaiyang/arcface-pytorch#68, checked on torch 2.13).
    `torch.linalg.norm(a - b, dim=-1)` / `torch.cdist` have a zero gradient at 0; otherwise add
    an epsilon inside the sqrt (`sqrt(d2 + 1e-8)`) or clamp it (`(1 - c**2).clamp(min=1e-7)`).
    A sum of squared coordinate differences (`dx ** 2 + dy ** 2`) is a distance too. So is a
    value clamped at exactly 0 (`d2.clamp(0).sqrt()`, `torch.sqrt(torch.clamp(d2, min=0))`):
    the clamp keeps negative round-off away, but its backward passes the gradient of a value
    on its bound, so an exact 0 (a prediction equal to its target, open-mmlab/mmrotate#205)
    still gets sqrt's infinite derivative; clamp at an epsilon (`clamp(min=1e-12)`) instead.
    Only a clamped value that holds a difference is reported (a product or a sum of
    non-negative terms reaches 0 only when a factor does), and only where it is differentiated
    (before a `backward()`, in a loss, or in a `forward`; not in a helper of a `forward`,
    which often computes statistics of the input).
    A mean squared error is a distance too: an RMSE written `torch.sqrt(F.mse_loss(p, y))`,
    `torch.sqrt(criterion(p, y))` with an `nn.MSELoss()` criterion, or
    `torch.sqrt(((p - y) ** 2).mean())` is exactly 0 when the prediction equals its target
    (a perfect fit, zero-initialised outputs) and its gradient there is NaN (checked on torch
    2.13); `torch.sqrt(mse + 1e-8)` keeps it finite.
    A root whose value is only compared or turned into indices (`dist.min(1)` to pick the
    closest mode, then `min_dist < th`) is never differentiated and is not reported, nor one a
    helper binds only to return it in a tuple position every caller drops.
    A weighted variance is one too (NOTE [weighted squared deviations]): `torch.sqrt(var)`
    with `var = torch.sum(dx2 * w, -1) / n` and `dx2 = (x - mean) ** 2`, a statistics
    pooling's standard deviation, is 0 for a constant input or all-zero weights (pyannote's
    StatsPool on an inactive speaker) and its gradient there is NaN; only in a `forward` itself
    (a helper standardising advantages or other data of no graph is left alone).
    Known limits: the squared difference (or `1 - c**2`) must be written in the sqrt call or
    bound to the name it reads in the same function.
    """

    code = "GT753"
    name = "sqrt-of-possible-zero"
    message = ("`{call}` takes the square root of {what}: the derivative of sqrt is infinite "
               "at 0, so the gradient there is inf/NaN; {remedy}")
    triggers = ("sqrt", "** 0.5", "**0.5", "pow(")
    gate_statements = True
    examples = [
        Bad("""
            import torch

            def edge_loss(v1, v2):
                return torch.sqrt(((v1 - v2) ** 2).sum(-1)).mean()
            """, at=(4, 11)),
        Bad("""
            import torch
            from torch import nn

            class ArcMargin(nn.Module):
                def forward(self, cosine):
                    sine = torch.sqrt(1.0 - torch.pow(cosine, 2))
                    return cosine * self.m - sine
            """, at=(6, 15)),
        Bad("""
            import torch

            def pairwise(x):
                d2 = (x[:, None] - x[None]).pow(2).sum(-1)
                return d2.sqrt()

            def train_step(model, x, opt):
                pairwise(model(x)).mean().backward()
                opt.step()
            """, at=(5, 11)),
        Bad("""
            import torch

            def pairwise_dist(a, b):
                d2 = a.pow(2).sum(1, keepdim=True) + b.pow(2).sum(1) - 2 * a @ b.t()
                return torch.sqrt(torch.clamp(d2, min=0.0))

            def fit(net, opt, x, y):
                pairwise_dist(net(x), net(y)).diagonal().mean().backward()
                opt.step()
            """, at=(5, 11)),
        Bad("""
            import torch
            from torch import nn

            class RMSELoss(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.mse = nn.MSELoss()

                def forward(self, pred, target):
                    return torch.sqrt(self.mse(pred, target))
            """, at=(10, 15)),
        Good("""
            import torch
            from torch import nn

            class RMSELoss(nn.Module):
                def __init__(self, eps=1e-8):
                    super().__init__()
                    self.mse = nn.MSELoss()
                    self.eps = eps

                def forward(self, pred, target):
                    return torch.sqrt(self.mse(pred, target) + self.eps)
            """),
        Good("""
            import torch

            def pairwise_dist(a, b):
                d2 = a.pow(2).sum(1, keepdim=True) + b.pow(2).sum(1) - 2 * a @ b.t()
                return torch.sqrt(torch.clamp(d2, min=1e-12))

            def fit(net, opt, x, y):
                pairwise_dist(net(x), net(y)).diagonal().mean().backward()
                opt.step()
            """),
        Good("""
            import torch

            def bures_term_loss(S1, S2):
                root_det = (torch.det(S1) * torch.det(S2)).clamp(0).sqrt()
                return (S1.diagonal(dim1=-2, dim2=-1).sum(-1) + root_det).mean()
            """),
        Good("""
            import torch

            def edge_loss(v1, v2, eps=1e-8):
                return torch.sqrt(((v1 - v2) ** 2).sum(-1) + eps)
            """),
        Good("""
            import torch

            def edge_loss(v1, v2):
                return torch.linalg.norm(v1 - v2, dim=-1)
            """),
        Good("""
            import torch

            def rms_loss(x):
                return torch.sqrt((x ** 2).sum(-1))
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        got = torch_op(node, ctx)
        if got is None:
            return
        op, operand = got
        if op not in ROOTS and not (op == "pow" and num(node.args[-1] if node.args else None)
                                    == 0.5):
            return
        yield from self._check(node, operand, ctx)

    def visit_BinOp(self, node: ast.BinOp, ctx: Context) -> Iterator[Finding]:
        if isinstance(node.op, ast.Pow) and num(node.right) == 0.5:
            yield from self._check(node, node.left, ctx)

    def _check(self, node: ast.AST, operand: ast.AST, ctx: Context) -> Iterator[Finding]:
        what = zero_at_coincidence(operand, ctx) or zero_at_coincidence(
            resolve(strip(operand), ctx, node.lineno), ctx)  # type: ignore[attr-defined]
        floor = bool(what) and what.startswith(FLOOR[:20])
        if what == VARIANCE and getattr(ctx.function, "name", None) != "forward":
            return  # statistics of data in a helper (an advantage's standardisation): no graph
        if what == SINE and _picked_by_where(operand, node, ctx):
            return
        if what and in_training(ctx, node, forward=what not in (DISTANCE, MSE),
                                through_forward=not floor and not input_feature(ctx)) \
                and carries_graph(ctx, operand, node, numeric=True) \
                and not only_selects(ctx.scope(), node) \
                and not dropped_element(ctx, ctx.statement, ctx.function, _callers) \
                and not returned_as_metric(ctx, ctx.function, node):
            # (the last: NOTE [metric element of a returned tuple])
            remedy = ("use `torch.linalg.norm(a - b, dim=...)` (gradient 0 at 0) or add an epsilon "
                   "inside the sqrt") if what == DISTANCE else \
                "add an epsilon inside the sqrt: `torch.sqrt(mse + 1e-8)`" if what == MSE else \
                "add an epsilon inside the sqrt: `torch.sqrt(var + 1e-8)`" if what == VARIANCE else \
                "clamp it first: `(1 - c**2).clamp(min=1e-7)`" if what == SINE else \
                "clamp at an epsilon instead: `.clamp(min=1e-12).sqrt()`"
            yield self.report(node, ctx, call=excerpt(ctx.source(node)), what=what, remedy=remedy)


def _picked_by_where(operand: ast.AST, node: ast.AST, ctx: Context) -> bool:
    """``x_in = torch.where(x < 1, x, torch.full_like(x, 0.5))`` then ``torch.sqrt(1 - x_in
    ** 2)``: the squared name is chosen element by element by a ``torch.where`` (the safe-input
    idiom of pytorch#52248: each branch gets only the inputs valid for it), so the code keeps it
    off the root's singular point on purpose."""
    for n in walk(operand):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Pow) \
                and isinstance(n.left, ast.Name):
            v = resolve(n.left, ctx, node.lineno)  # type: ignore[attr-defined]
            got = torch_op(v, ctx) if isinstance(v, ast.Call) else None
            if got is not None and got[0] == "where":
                return True
    return False


class GuardOnSingularOutput(Rule):
    """`torch.clamp(torch.log(p), min=-100)`, `torch.minimum(torch.rsqrt(s), 1 / eps)`: the
    guard bounds the value after the op, not its gradient.

    Why: where `p` (or `s`) is 0, `log`/`rsqrt`/`1/x` return an infinite value, which the clamp
    replaces; the clamp then passes a gradient of 0 back to the op, whose derivative there is
    infinite, and `0 * inf` is NaN (keras-team/keras#23075, checked on torch 2.13). The guard
    belongs on the input: `torch.log(p.clamp(min=eps))`, `torch.rsqrt(s.clamp(min=eps))`.
    Known limits: the guard must be in the same expression or applied to the name the op's
    result is bound to in the same function; `nan_to_num` (which replaces the NaN any of its
    operand's ops makes) also covers a log or reciprocal anywhere inside that expression
    (`(p * torch.log(p / q)).nan_tonum(0)`).
    """

    code = "GT754"
    name = "guard-on-singular-output"
    message = ("`{op_src}` is bounded afterwards by `{guard}` (line {line}), which fixes the "
               "value, not the gradient: where the input is 0 the derivative of `{op}` is "
               "infinite and the gradient becomes NaN; clamp the input instead")
    triggers = ("clamp", "clip", "minimum", "maximum", "nan_to_num", "fmin", "fmax")
    gate_statements = True
    examples = [
        Bad("""
            import torch

            def bce_loss(p, y):
                return -(y * torch.clamp(torch.log(p), min=-100)).mean()
            """, at=(4, 29)),
        Bad("""
            import torch

            def l2_normalize(x, eps=1e-12):
                inv_norm = torch.rsqrt(torch.sum(x * x, dim=-1, keepdim=True))
                inv_norm = torch.minimum(inv_norm, torch.tensor(1.0 / eps))
                return x * inv_norm

            def train_step(model, x, opt):
                l2_normalize(model(x)).sum().backward()
                opt.step()
            """, at=(4, 15)),
        Good("""
            import torch

            def bce_loss(p, y, eps=1e-12):
                return -(y * torch.log(p.clamp(min=eps))).mean()
            """),
        Good("""
            import torch

            def l2_normalize(x, eps=1e-12):
                inv_norm = torch.rsqrt(torch.sum(x * x, dim=-1, keepdim=True).clamp(min=eps))
                return x * torch.minimum(inv_norm, torch.tensor(1.0 / eps))
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        b = bounds(node, ctx)
        if b is None or _made_discrete(ctx):
            return
        got = torch_op(node, ctx)
        operands = [got[1]] if got else []  # type: ignore[index]
        if b[0] in ("minimum", "maximum", "fmin", "fmax"):
            operands = [a for a in node.args]
        found = []
        for operand in operands:
            op_node = strip(operand)
            if isinstance(op_node, (ast.Name, ast.Attribute)):
                op_node = strip(resolve(op_node, ctx, node.lineno))
            op = _singular_output(op_node, ctx)
            if op is None and b[0] == "nan_to_num":
                op_node, op = _singular_inside(op_node, ctx)
            if op is None:
                continue
            lo, hi = b[1], b[2]
            if (op in LOGS and lo is None) or (op not in LOGS and hi is None):
                continue  # a bound on the other side does not touch the infinity
            found.append((op_node, op))
        found = [(n, op) for n, op in found if not _data_input(n, ctx)]
        if not found or not in_training(ctx, node):  # the costly question last
            return
        for op_node, op in found:
            seen = ctx.memo("GT754-seen", ctx.tree, set)
            if id(op_node) in seen:
                continue
            seen.add(id(op_node))
            related = [] if op_node.lineno == node.lineno else [  # type: ignore[attr-defined]
                Related(ctx.path, node.lineno, "the value is bounded here", ctx.column(node))]
            yield self.report(op_node, ctx, related=related, op_src=excerpt(ctx.source(op_node)),
                              guard=_guard_name(node, ctx), line=node.lineno, op=op)


def _data_input(op_node: ast.AST, ctx: Context) -> bool:
    """The singular op reads data no gradient flows to (``batch["target"]["near"].log()``:
    an entry of a batch argument, by the shared tracer): an infinite derivative there is
    never multiplied into any gradient."""
    from gradtrace.lint.analysis.origins import origins
    if isinstance(op_node, ast.BinOp):
        inp: ast.AST = op_node.right
    else:
        got = torch_op(op_node, ctx) if isinstance(op_node, ast.Call) else None
        if got is None:
            return False
        inp = got[1]
    scope = ctx.scope()
    st = scope.statement_of(op_node)
    if not isinstance(inp, ast.expr) or st is None:
        return False
    return not origins(ctx, scope.node).trace(inp, st, st.lineno).live


DISCRETE = frozenset({"long", "int", "short", "bool", "byte", "floor", "ceil", "round", "trunc",
                      "argmax", "argmin", "sign"})


def _made_discrete(ctx: Context) -> bool:
    """``x.log2().clamp(0, 4).long()``: the guarded value becomes an index (no gradient)."""
    for e in reversed(ctx.exprs[:-1]):
        if isinstance(e, ast.Attribute) and e.attr in DISCRETE or isinstance(e, ast.Call) \
                and isinstance(e.func, ast.Attribute) and e.func.attr in DISCRETE:
            return True
        if not isinstance(e, (ast.Attribute, ast.Call)):
            return False
    return False


def _guard_name(node: ast.Call, ctx: Context) -> str:
    q = ctx.qualified_name(node.func) or ""
    if q.startswith("torch."):
        return q + "(...)"
    return "." + getattr(node.func, "attr", "clamp") + "(...)"


def _singular_inside(e: ast.AST, ctx: Context) -> tuple[ast.AST, str | None]:
    """The first singular op anywhere in ``e`` (``nan_to_num`` replaces a NaN made by any of
    its operands' ops: ``(p * torch.log(p / q)).nan_tonum(0)``)."""
    for n in bfs_walk(e):
        if isinstance(n, (ast.Call, ast.BinOp)) and n is not e:
            op = _singular_output(n, ctx)
            if op is not None:
                return n, op
    return e, None


def _singular_output(e: ast.AST, ctx: Context) -> str | None:
    """``log``/``rsqrt``/``reciprocal``/``1/x`` when ``e`` applies one to an input that is not
    kept off 0 (no ``+ eps``, clamp, where inside)."""
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Div) and num(e.left) is not None:
        return None if has_positive_shift(e.right, ctx) else "1/x"
    if not isinstance(e, ast.Call):
        return None
    got = torch_op(e, ctx)
    if got is None or got[0] not in LOGS | RECIPROCALS:
        return None
    if has_positive_shift(got[1], ctx):
        return None
    if isinstance(got[1], (ast.Name, ast.Attribute)) and dotted(got[1]):
        inner = resolve(got[1], ctx, e.lineno)  # type: ignore[attr-defined]
        if inner is not got[1] and has_positive_shift(inner, ctx):
            return None
    return got[0]
