"""GT766: the epsilon that keeps a root of a sum of squares off 0 is added after the root."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.cuts import constant_default_args, self_assignments
from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.analysis.selectors import only_selects
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.numerics._bounds import CLAMPS, bounds, num
from gradtrace.lint.rules.numerics._ops import (
    carries_graph, has_positive_shift, in_training, resolve, strip, torch_op)
from gradtrace.lint.rules.numerics._zeros import _square_of, zero_at_coincidence
from gradtrace.lint.rules.numerics._grouped import grouped_sum
from gradtrace.lint.excerpt import excerpt

REDUCTIONS = frozenset({"sum", "mean", "nansum", "nanmean"})
LOWER_CLAMPS = CLAMPS | {"clamp_min", "clamp_min_"}


def _squares(e: ast.AST, ctx: Context) -> bool:
    """``x ** 2``, ``x.pow(2)``, ``x * x``, ``torch.square(x)``, or a sum of them."""
    e = strip(e)
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
        return _squares(e.left, ctx) and _squares(e.right, ctx)
    return _square_of(e, ctx) is not None


def _sum_of_squares(e: ast.AST, ctx: Context) -> bool:
    """``(x ** 2).sum(dim)``, ``torch.mean(x * x, -1)``, ``re ** 2 + im ** 2``, a per-group
    sum (``zeros.index_add_(0, group, x * x)``, a helper of the file returning one of its
    argument) and any of them divided by a count: 0 exactly where every squared entry is 0."""
    e = strip(e)
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Div):
        return _sum_of_squares(e.left, ctx)
    if isinstance(e, ast.Call):
        got = torch_op(e, ctx)
        if got is not None and got[0] in REDUCTIONS:
            return _squares(got[1], ctx)
        summed = grouped_sum(e, ctx)
        return summed is not None and _squares(summed, ctx)
    return isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add) and _squares(e, ctx)


def _small_setting(e: ast.AST, ctx: Context) -> bool:
    """A positive constant below 1 (``1e-8``), an argument whose default is a number
    (``eps=1e-10``), or ``self.<x>`` only ever set to such values: a guard, not a tensor."""
    v = num(e)
    if v is not None:
        return 0 < v < 1
    fn = ctx.function
    if isinstance(e, ast.Name) and fn is not None:
        a = fn.args
        pos = [*a.posonlyargs, *a.args]
        pairs = [*zip(pos[len(pos) - len(a.defaults):], a.defaults),
                 *zip(a.kwonlyargs, a.kw_defaults)]
        return any(arg.arg == e.id and d is not None and (x := num(d)) is not None
                   and 0 < x < 1 for arg, d in pairs) \
            and len(ctx.scope().bindings.get(e.id, ())) <= 1
    name = dotted(e) if isinstance(e, ast.Attribute) else None
    if name is not None and name.startswith("self.") and name.count(".") == 1:
        cls = ctx.class_def
        values = self_assignments(cls, name, ctx)
        settings = constant_default_args(cls)
        return bool(values) and all(
            (x := num(v)) is not None and 0 < x < 1 or isinstance(v, ast.Name)
            and v.id in settings for v in values)
    return False


class EpsilonAfterRootOfSquares(Rule):
    """`x / (torch.sqrt((x ** 2).sum(1)) + eps)`: the epsilon guards the root's value, not its
    derivative.

    Why: the square root of a sum of squares is exactly 0 where every squared entry is 0 (a
    feature position every ReLU channel left at 0, an all-zero row, a padded frame). Adding
    `eps` after the root (or clamping the root at `eps`) keeps the division finite, so the
    code shows it expects that 0, but the derivative of sqrt there is `1 / (2 * 0)` = inf, and
    the gradient flowing back through it is `0 * inf` = NaN (richzhang/PerceptualSimilarity#69,
    checked on torch 2.13): with anomaly detection `SqrtBackward0` reports it, without it the
    weights turn NaN. Put the epsilon under the root (`torch.sqrt(s + eps)`), clamp the sum
    first (`s.clamp(min=eps).sqrt()`), or use `torch.linalg.vector_norm` / `F.normalize`,
    whose gradient at 0 is finite.
    Known limits: the root and the `+ eps` (or clamp) are in one function, the root's operand
    written in the call or bound to the name it reads; the epsilon is a small constant, an
    argument with a small default, or `self.<x>` set only to such values; the value must be
    differentiated (before a `backward()`, in a loss, in a `forward` or a helper it calls). A
    squared *difference* (`((a - b) ** 2).sum()`) is GT753's.
    """

    code = "GT766"
    name = "epsilon-after-root-of-squares"
    message = ("`{root}` is the square root of a sum of squares, kept off 0 afterwards by "
               "`{guard}` (line {line}): that fixes the value, not the derivative, which is "
               "infinite where the sum is 0, so the gradient there is NaN; put the epsilon "
               "under the root (`sqrt(s + eps)`)")
    triggers = ("sqrt", "** 0.5", "**0.5", "pow(")
    gate_statements = True
    examples = [
        Bad("""
            import torch

            def normalize_tensor(feat, eps=1e-10):
                norm = torch.sqrt(torch.sum(feat ** 2, dim=1, keepdim=True))
                return feat / (norm + eps)

            def train_step(net, x, opt):
                normalize_tensor(net(x)).sum().backward()
                opt.step()
            """, at=(4, 11)),
        Bad("""
            import torch
            from torch import nn

            class RMSNorm(nn.Module):
                def forward(self, x):
                    rms = x.pow(2).mean(-1, keepdim=True).sqrt().clamp(min=1e-6)
                    return x / rms
            """, at=(6, 14)),
        Good("""
            import torch

            def normalize_tensor(feat, eps=1e-10):
                norm = torch.sqrt(torch.sum(feat ** 2, dim=1, keepdim=True) + eps)
                return feat / norm

            def train_step(net, x, opt):
                normalize_tensor(net(x)).sum().backward()
                opt.step()
            """),
        Good("""
            import torch

            def normalize(feat, eps=1e-10):
                return feat / (feat.norm(dim=1, keepdim=True) + eps)

            def train_step(net, x, opt):
                normalize(net(x)).sum().backward()
                opt.step()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        got = torch_op(node, ctx)
        if got is not None and (got[0] == "sqrt" or got[0] == "pow" and node.args
                                and num(node.args[-1]) == 0.5):
            yield from self._check(node, got[1], ctx)

    def visit_BinOp(self, node: ast.BinOp, ctx: Context) -> Iterator[Finding]:
        if isinstance(node.op, ast.Pow) and num(node.right) == 0.5:
            yield from self._check(node, node.left, ctx)

    def _check(self, root: ast.AST, operand: ast.AST, ctx: Context) -> Iterator[Finding]:
        inner = strip(operand)
        if isinstance(inner, (ast.Name, ast.Attribute)):
            inner = strip(resolve(inner, ctx, root.lineno))  # type: ignore[attr-defined]
        if not _sum_of_squares(inner, ctx) or has_positive_shift(inner, ctx) \
                or zero_at_coincidence(inner, ctx):
            return  # (a squared distance is GT753's, whatever is added after the root)
        got = self._guard(root, ctx)
        if got is None or not _trains(ctx, root) \
                or not carries_graph(ctx, operand, root) \
                or only_selects(ctx.scope(), root):  # (NOTE [output never differentiated])
            return
        guard, text = got
        line = guard.lineno  # type: ignore[attr-defined]
        related = [] if root.lineno == line else [  # type: ignore[attr-defined]
            Related(ctx.path, line, "the epsilon is applied here", ctx.column(guard))]
        yield self.report(root, ctx, related=related, root=excerpt(ctx.source(root)),
                          guard=text, line=line)

    def _guard(self, root: ast.AST, ctx: Context) -> tuple[ast.AST, str] | None:
        """Where the root's value is kept off 0: ``root + eps`` or ``root.clamp(min=eps)``
        around it, or the same on the name it is bound to (``norm = root``, later ``norm +
        eps``) in this function."""
        parents = ctx.exprs[:-1]
        while parents and isinstance(parents[-1], ast.Subscript) \
                and parents[-1].value is root:
            root, parents = parents[-1], parents[:-1]  # `root[group] + eps`: entries of it
        parent = parents[-1] if parents else None
        if isinstance(parent, ast.Attribute) and len(parents) > 1 \
                and isinstance(parents[-2], ast.Call) and parents[-2].func is parent:
            parent = parents[-2]  # `root.clamp(min=eps)`
        if parent is not None and (got := _guarding(parent, root, ctx)) is not None:
            return got
        s = ctx.statement
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1
                and isinstance(s.targets[0], ast.Name) and strip(s.value) is root):
            return None
        name = s.targets[0].id
        for later in ctx.scope().stmts:
            if later.lineno <= s.lineno:
                continue
            for n in walk(later):
                if isinstance(n, (ast.BinOp, ast.Call)) and any(
                        isinstance(x, ast.Name) and x.id == name for x in _operands(n, ctx)):
                    got = _guarding(n, None, ctx)
                    if got is not None and resolve(ast.Name(id=name, ctx=ast.Load()), ctx,
                                                   n.lineno) is s.value:
                        return got
        return None


def _trains(ctx: Context, root: ast.AST) -> bool:
    """Whether a gradient flows through ``root``; in a helper that a ``forward`` calls, only
    when a caller hands it a layer's output (``normalize(self.slice(x))``): a helper given the
    model's raw input (audio normalised by its volume) computes statistics of data."""
    if in_training(ctx, root, through_forward=False):
        return True
    fn = ctx.function
    if fn is None or not in_training(ctx, root):
        return False
    for call, _, outer in call_sites(ctx, fn.name):
        caller = next((o for o in reversed(outer) if isinstance(o, FUNCTION_TYPES)), None)
        if caller is None or caller is fn:
            continue
        scope = ctx.scope(caller)
        for a in call.args:
            v: ast.AST | None = a
            if isinstance(a, ast.Name):
                b = scope.binding_before(a.id, call.lineno)
                v = b.value if b is not None else None
            if v is not None and _runs_layer(v, scope, call.lineno):
                return True
    return False


def _runs_layer(e: ast.AST, scope: Scope, line: int) -> bool:
    """``self.enc(x)``, ``block(x)`` (``block`` a local: a loop over layers), inside ``e``."""
    for n in walk(e):
        if isinstance(n, ast.Call):
            f = n.func
            name = dotted(f) or ""
            if name.startswith("self.") and name.count(".") == 1:
                return True
            if isinstance(f, ast.Name) and scope.binding_before(f.id, line) is not None:
                return True
    return False


def _operands(n: ast.AST, ctx: Context) -> list[ast.AST]:
    if isinstance(n, ast.BinOp):
        return [strip(n.left), strip(n.right)]
    got = torch_op(n, ctx) if isinstance(n, ast.Call) else None
    return [strip(got[1])] if got is not None else []


def _guarding(n: ast.AST, root: ast.AST | None, ctx: Context) -> tuple[ast.AST, str] | None:
    """``(n, text)`` when ``n`` adds a small setting to ``root`` (any operand when None) or
    clamps it from below at one."""
    if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add):
        for a, b in ((n.left, n.right), (n.right, n.left)):
            if (root is None or strip(a) is root) and _small_setting(b, ctx):
                return n, f"+ {ctx.source(b)}"
        return None
    if isinstance(n, ast.Call):
        b = bounds(n, ctx)
        got = torch_op(n, ctx)
        if b is not None and b[0] in LOWER_CLAMPS and b[1] is not None and got is not None \
                and (root is None or strip(got[1]) is root) and _small_setting(b[1], ctx):
            return n, f".{b[0]}({ctx.source(b[1])})"
    return None
