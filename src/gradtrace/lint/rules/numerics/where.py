"""GT751: a `torch.where`/`masked_fill` guard placed outside the singular op it guards."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.flow import DETACHED, NUMBER
from gradtrace.lint.rules.numerics._ops import (
    DIV, ROOT, carries_graph, has_positive_shift, in_training, resolve, singular_uses, spelled,
    torch_op)
from gradtrace.lint.nodes import bfs_walk, walk
from gradtrace.lint.rules.numerics._where_helpers import helper_branch_uses
from gradtrace.lint.analysis.helper_grad import sure_numerator
from gradtrace.lint.rules.numerics._where_guard import (
    BOUNDED, METHOD_COMPARE, OVERFLOW, _const, _unguarded,
)


class SingularOpOutsideWhereGuard(Rule):
    """`torch.where(x > 0, torch.sqrt(x), 0)`: the guard picks the value, autograd still
    differentiates the op where it is singular.

    Why: `torch.where` (and `masked_fill`) run both branches and pass a gradient of 0 to the
    one they did not select. Where that branch's op is singular (`sqrt`/`rsqrt`/`log`/a
    division at 0, `acos` at +-1, `exp` overflowing for large inputs), its derivative is
    infinite or NaN and `0 * inf` is NaN, so the gradient of the guarded elements is NaN
    (pytorch/pytorch#156212, checked on torch 2.13). Put the guard *inside* the op:
    `torch.sqrt(torch.where(x > 0, x, 1.0))`, `torch.log(x.clamp(min=eps))`,
    `torch.exp(x.clamp(max=th))`, then select.
    Known limits: the condition must test the very value the op consumes (directly, or a mask
    bound to that comparison in the same function), or a name the op consumes arithmetic of
    (`torch.where(x < 1, torch.sqrt(1 - x ** 2), ...)`, judged at the bound and just beyond,
    not when the arithmetic adds a constant or the op sits under a rounding); a condition on
    another tensor is not judged; nor is a method of a `torch.utils.data.Dataset` subclass (it
    prepares samples: a graph's degree normalisation in its `collate`). A guarded division
    (`torch.where(union > 0, inter / union, 0)`) is judged only in a function whose result a
    caller backpropagates, or when what it divides surely requires grad
    (NOTE [divided graph]), and on a denominator no `+ eps` or clamp keeps off 0.
    """

    code = "GT751"
    name = "singular-op-outside-where-guard"
    message = ("`{guard}` discards `{op}` where `{operand}` fails its test, but autograd "
               "still differentiates it there ({why}) and 0 * inf makes those gradients NaN; "
               "guard the input (`{operand}` replaced by a safe value or clamped before "
               "`{op}`), then select")
    triggers = ("where", "masked_fill", "log1p(", ".log(", "log2(", "log10(", "sqrt(",
                "acos(", "asin(")  # (the op in an indexed expression: `torch.log1p(a)[a > -1]`)
    gate_statements = True
    examples = [
        Bad("""
            import torch

            def soft_root(x):
                return torch.where(x > 0, torch.sqrt(x), x)
            """, at=(4, 11)),
        Bad("""
            import torch

            def capped_exp(x, limit):
                mask = x <= limit
                return torch.where(mask, x.exp(), torch.ones_like(x))
            """, at=(5, 11)),
        Bad("""
            import torch

            def safe_log(p):
                return torch.log(p).masked_fill(p == 0, 0.0)
            """, at=(4, 11)),
        Good("""
            import torch

            def soft_root(x):
                safe = torch.where(x > 0, x, torch.ones_like(x))
                return torch.where(x > 0, torch.sqrt(safe), x)
            """),
        Good("""
            import torch

            def log_then_linear(x):
                return torch.where(x >= 1, x - 1, torch.log(x))
            """),
        Good("""
            import torch

            def masked_log(p, valid):
                return torch.where(valid, torch.log(p), torch.zeros_like(p))
            """),
    ]

    def visit_Subscript(self, node: ast.Subscript, ctx: Context) -> Iterator[Finding]:
        """``torch.log1p(a)[a > -1]``: a boolean index selects like ``where`` (its gradient is
        0 at the elements left out); ``t[mask] = v`` keeps ``t`` where the mask is False."""
        if ctx.grad_disabled is not None or not _mask_like(node.slice):
            return
        if isinstance(node.slice, ast.Name):
            bound = resolve(node.slice, ctx, node.lineno)
            if bound is node.slice or isinstance(bound, ast.Name) or not _mask_like(bound):
                return
        picked = (node.slice, [(node.value, isinstance(node.ctx, ast.Load))])
        yield from self._judge(node, picked, ctx)

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        picked = _where_parts(node, ctx)
        if picked is None or ctx.grad_disabled is not None:
            return
        yield from self._judge(node, picked, ctx)

    def _judge(self, node: ast.AST, picked: tuple[ast.AST, list[tuple[ast.AST, bool]]],
               ctx: Context) -> Iterator[Finding]:
        test, branches = picked
        test = resolve(test, ctx, node.lineno)
        for branch, selected_when in branches:
            expr = resolve(branch, ctx, node.lineno)
            inline = [(u, False) for u in singular_uses(expr, ctx)]
            helper = [(u, True) for u in helper_branch_uses(expr, ctx, node.lineno)]
            for (n, op, operand, why), in_helper in inline + helper:
                division = op in ("/", "div", "true_divide", "divide")
                sure = division and sure_numerator(n, ctx, node.lineno)
                if division and not ((sure or _loss_division(ctx))
                                     and _unshifted(operand, ctx, node)) \
                        or not _tensor_operand(operand, ctx, node.lineno, division):
                    continue  # a guarded division of counts (a metric): NOTE [divided graph]
                if op in OVERFLOW and _overflows_too(operand, branch, branches, ctx, node):
                    continue  # `where(s < 0.5, expm1(s), exp(s) - 1)`: no guard, a precision pick
                if _unguarded(op, operand, test, selected_when, ctx,
                              not _rounded(n, expr, ctx)) \
                        and (sure or carries_graph(ctx, operand, node)):
                    # (a statistic of a buffer carries none: moshi's `_compute_entropy`)
                    shown = {"/": "/", "**": "**"}.get(op, op)
                    related = [] if n.lineno == node.lineno else [  # type: ignore[attr-defined]
                        Related(ctx.path, n.lineno, f"`{ctx.source(n)}` is computed here",
                                ctx.column(n))]
                    if in_helper:  # NOTE [where branch built by a helper]
                        related = [Related(ctx.path, node.lineno,  # type: ignore[attr-defined]
                                           f"`{_short(node, ctx)}` selects the helper's "
                                           "result here", ctx.column(node))]
                    yield self.report(n if in_helper else node, ctx, related=related,
                                      guard=_short(node, ctx),
                                      operand=ast.unparse(operand) if in_helper
                                      else ctx.source(operand), op=shown,
                                      why=_why(op, why), cond=ctx.source(test))
                    return


def _overflows_too(operand: ast.AST, branch: ast.AST, branches: list[tuple[ast.AST, bool]],
                   ctx: Context, node: ast.AST) -> bool:
    """The branch chosen where ``branch`` is not also applies an overflowing function to
    ``operand`` (SEDD's ``where(sigma < 0.5, expm1(sigma), exp(sigma) - 1)``, two spellings
    of ``e**x - 1`` for precision): at the inputs where ``branch``'s op overflows, the kept
    value overflows as well, so the selection guards nothing and adds no NaN of its own."""
    want = spelled(operand)
    others = [resolve(b, ctx, node.lineno) for b, _ in branches if b is not branch]
    if len(branches) < 2 or not others:
        return False
    return all(any(op in OVERFLOW and spelled(x) == want for _, op, x, _ in singular_uses(o, ctx))
               for o in others)


ROUNDING = frozenset({"ceil", "floor", "round", "trunc", "sign", "long", "int", "argmax"})


def _rounded(n: ast.AST, expr: ast.AST, ctx: Context) -> bool:
    """The singular op ``n`` sits inside a rounding of ``expr`` (``torch.ceil(log1p(-c) /
    ...)``, a sample count): what it selects carries no gradient to judge."""
    for c in bfs_walk(expr):
        if isinstance(c, ast.Call) and c is not n and any(x is n for x in bfs_walk(c)):
            got = torch_op(c, ctx)
            if got is not None and got[0] in ROUNDING:
                return True
    return False


def _mask_like(e: ast.AST) -> bool:
    """A slice that is a boolean mask: a comparison, its negation or combination, a
    comparison method (``x.gt(0)``) or a name (bound to one: judged by the comparisons)."""
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.Invert, ast.Not)):
        return _mask_like(e.operand)
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.BitAnd, ast.BitOr)):
        return _mask_like(e.left) or _mask_like(e.right)
    return isinstance(e, (ast.Compare, ast.Name)) or isinstance(e, ast.Call) and isinstance(
        e.func, ast.Attribute) and e.func.attr in METHOD_COMPARE


def _tensor_operand(e: ast.AST, ctx: Context, line: int, division: bool = False) -> bool:
    """Not a constant, a new tensor, a number or a value already kept off the singular point
    (``x = x.clamp(min=1)`` before the guard; a denominator: judged by :func:`_unshifted`)."""
    if _const(e) is not None:
        return False
    if ctx.scope().kind(e) in (NUMBER, DETACHED):
        return False
    inner = resolve(e, ctx, line)
    return inner is e or division or not has_positive_shift(inner, ctx)


def _unshifted(e: ast.AST, ctx: Context, node: ast.AST) -> bool:
    """A denominator nothing keeps off 0 (NOTE [guarded division in a loss]): no clamp-like
    call in its expression, and no sum with a constant, an attribute (``self.eps``) or
    a name the function does not bind (a parameter ``smooth``, a global ``EPS``); a sum of
    the function's own tensors (``area_p + area_g - inter``) may be 0."""
    inner = resolve(e, ctx, getattr(node, "lineno", 0))
    bound = ctx.scope().bindings
    for n in walk(inner):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add) and any(
                _const(x) is not None or isinstance(x, ast.Attribute)
                or isinstance(x, ast.Name) and x.id not in bound for x in (n.left, n.right)):
            return False
        if isinstance(n, ast.Call) and not isinstance(n.func, ast.Name) \
                and has_positive_shift(n, ctx):
            return False
    return True


def _loss_division(ctx: Context) -> bool:
    """# NOTE [guarded division in a loss]
    A division guarded by ``torch.where`` is judged only in a function whose result a caller
    backpropagates (NOTE [backpropagated returns]: ``loss = iou_loss(p, g); loss.backward()``):
    elsewhere such a ratio is mostly a count in a metric."""
    from gradtrace.lint.analysis.backpropagated import backpropagated
    return ctx.function is not None and id(ctx.function) in backpropagated(ctx)


def _why(op: str, why: str) -> str:
    if why in (DIV, ROOT):
        return why
    return f"`{op}` has {why}"


def _short(node: ast.AST, ctx: Context) -> str:
    if isinstance(node, ast.Subscript):
        return f"[{ctx.source(node.slice)[:30]}]"
    f = node.func  # type: ignore[attr-defined]
    if (ctx.qualified_name(f) or "").startswith("torch.") or not isinstance(f, ast.Attribute):
        return f"{ctx.source(f)}(...)"
    return f".{f.attr}(...)"


def _where_parts(node: ast.Call, ctx: Context
                 ) -> tuple[ast.AST, list[tuple[ast.AST, bool]]] | None:
    """(condition, [(branch, selected when the condition is ...)]) of a where-like call."""
    q = ctx.qualified_name(node.func) or ""
    if q == "torch.where" and len(node.args) == 3:
        return node.args[0], [(node.args[1], True), (node.args[2], False)]
    got = torch_op(node, ctx) if not q.startswith("torch.") else None
    if got and got[0] == "where" and len(node.args) == 2:
        return node.args[0], [(got[1], True), (node.args[1], False)]
    if got and got[0] == "masked_fill" and len(node.args) == 2:
        return node.args[0], [(got[1], False)]
    return None


NAN_TESTS = frozenset({"isnan", "isinf", "isfinite", "isposinf", "isneginf"})


def _nan_tested(test: ast.AST, ctx: Context, line: int, depth: int = 0) -> set[str]:
    """Spellings of the values ``test`` checks for NaN or inf (``torch.isnan(r)``,
    ``~torch.isfinite(r)``, ``r != r``), also through names bound to such masks."""
    out: set[str] = set()
    if depth > 3:
        return out
    for n in bfs_walk(test):
        if isinstance(n, ast.Call):
            got = torch_op(n, ctx)
            if got and got[0] in NAN_TESTS:
                out.add(spelled(got[1]))
        elif isinstance(n, ast.Compare) and len(n.ops) == 1 \
                and isinstance(n.ops[0], ast.NotEq) and spelled(n.left) == spelled(
                    n.comparators[0]):
            out.add(spelled(n.left))
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            v = resolve(n, ctx, line)
            if v is not n:
                out |= _nan_tested(v, ctx, getattr(v, "lineno", line), depth + 1)
    return out


class NanFilteredAfterSingularOp(Rule):
    """The NaNs (or infs) a division, log or root makes are filtered out afterwards
    (`r = num / den; r[~torch.isnan(r)].mean()`, `torch.where(torch.isnan(r), 0, r)`,
    `r[torch.isinf(r)] = 0`): the value is clean, the gradient is not.

    Why: the filter picks the elements autograd differentiates, but the op still ran on every
    element; where it made the NaN (0/0, log(0), sqrt of 0) its derivative is infinite or
    undefined, the filter passes a gradient of 0 to it, and `0 * inf` is NaN: the NaN reaches
    the parameters (anomaly mode: "Function 'DivBackward0' returned nan values",
    pytorch/pytorch#22820). Keep the singular inputs away *before* the op
    (`den.clamp(min=eps)`, `torch.where(den == 0, 1, den)`), then filter.
    Known limits: the filtered value must be the op's result, in the same expression or
    bound to a name in the same function; the op must be differentiated (before a
    `backward()`, in a loss or a `forward`), on an input that may carry a graph (a degree
    normalisation of a loaded adjacency matrix is data: NOTE [filtered op off the graph]).
    """

    code = "GT757"
    name = "nan-filtered-after-singular-op"
    message = ("`{op_src}` makes NaN/inf where {why_short}, and they are filtered out only "
               "afterwards ({guard}, line {line}): the value is clean but autograd still "
               "differentiates the op there and 0 * inf makes the gradient NaN; keep the "
               "inputs off the singular point before `{op}`")
    triggers = ("isnan", "isinf", "isfinite", "isposinf", "isneginf")
    # statement visitors, on every statement of a file that tests for NaN: the filter
    # (`r[~nan_mask]`) is often on another line than the test (`nan_mask = torch.isnan(r)`),
    # but in the same function (a name is resolved in its own function only), so a function
    # whose code holds no test (a NaN test call, or `r != r`) is skipped
    gate_statements = "function"
    statement_triggers = (*triggers, "!=")
    examples = [
        Bad("""
            import torch

            def smape(pred, target):
                ratio = torch.abs(pred - target) / (torch.abs(pred) + torch.abs(target))
                return ratio[~torch.isnan(ratio)].mean()

            def train_step(model, x, y, opt):
                smape(model(x), y).backward()
                opt.step()
            """, at=(4, 12)),
        Good("""
            import torch

            def smape(pred, target):
                den = torch.abs(pred) + torch.abs(target)
                ratio = torch.abs(pred - target) / torch.where(den == 0, 1.0, den)
                return ratio[den > 0].mean()

            def train_step(model, x, y, opt):
                smape(model(x), y).backward()
                opt.step()
            """),
    ]

    def visit_Assign(self, node: ast.stmt, ctx: Context) -> Iterator[Finding]:
        if ctx.grad_disabled is not None:
            return
        text = ctx.code_of(node)
        if "[" not in text and "where" not in text and "masked_fill" not in text:
            return
        for n in bfs_walk(node):
            if isinstance(n, ast.Subscript) and not isinstance(n.slice, (ast.Constant,
                                                                         ast.Slice)):
                yield from self._judge(n, n.slice, [n.value], ctx)
            elif isinstance(n, ast.Call):
                picked = _where_parts(n, ctx)
                if picked is not None:
                    yield from self._judge(n, picked[0], [b for b, _ in picked[1]], ctx)

    visit_Return = visit_Expr = visit_AugAssign = visit_AnnAssign = visit_Assign

    def _judge(self, node: ast.AST, test: ast.AST, branches: list[ast.AST],
               ctx: Context) -> Iterator[Finding]:
        tested = _nan_tested(test, ctx, node.lineno)  # type: ignore[attr-defined]
        if not tested:
            return
        for branch in branches:
            if spelled(branch) not in tested:
                continue
            expr = resolve(branch, ctx, node.lineno)  # type: ignore[attr-defined]
            for n, op, operand, why in singular_uses(expr, ctx):
                # the filter says the author saw NaN/inf come out: a sum of tensors in the
                # operand (`abs(a) + abs(b)`) did not keep it off the singular point; a
                # constant shift or a clamp did (the filter then catches upstream NaNs); a
                # constant over a value (`1.0 / count ** 2`) is a weight of the data
                if op in OVERFLOW or _const(operand) is not None or op == "/" and _const(
                        n.left) is not None \
                        or ctx.scope().kind(operand) in (NUMBER, DETACHED) \
                        or _guarded(operand, ctx, node.lineno):  # type: ignore[attr-defined]
                    continue
                if not in_training(ctx, node, through_forward=False):
                    return
                if not any(carries_graph(ctx, x, node) for x in _differentiated(n, op, operand, ctx)):
                    continue  # NOTE [filtered op off the graph]
                seen = ctx.memo("GT757-seen", ctx.tree, set)
                if id(n) in seen:
                    return
                seen.add(id(n))
                related = [] if n.lineno == node.lineno else [  # type: ignore[attr-defined]
                    Related(ctx.path, node.lineno, "the NaNs are filtered here",  # type: ignore[attr-defined]
                            ctx.column(node))]
                yield self.report(n, ctx, related=related, op_src=ctx.source(n)[:50],
                                  why_short=_singular_point(op), guard=_short(node, ctx),
                                  line=node.lineno, op={"/": "/"}.get(op, op))  # type: ignore[attr-defined]
                return


GUARDS = frozenset({"clamp", "clip", "clamp_min", "clamp_", "clamp_min_", "maximum", "max",
                    "where", "masked_fill", "nan_to_num", "softplus", "relu", "fmax"})


def _guarded(e: ast.AST, ctx: Context, line: int) -> bool:
    """``e`` is kept off the singular point before the op: clamped, maximum-ed or replaced
    (``den.clamp(min=eps)``), also in the names it reads (``s = s.clamp_min(tiny); a / s``), or
    shifted by a constant (``s + 1e-9``): a NaN filter after it only catches NaNs from
    upstream."""
    todo = [e, resolve(e, ctx, line)]
    todo += [resolve(n, ctx, line) for n in bfs_walk(e) if isinstance(n, ast.Name)]
    for v in todo:
        for n in bfs_walk(v):
            if isinstance(n, ast.Call):
                got = torch_op(n, ctx)
                name = got[0] if got else (ctx.qualified_name(n.func) or "").rpartition(".")[2]
                if name in GUARDS:
                    return True
            elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add) and any(
                    (_const(x) or 0) > 0 for x in (n.left, n.right)):
                return True
    return False


# NOTE [filtered op off the graph]: GT757 asks that the singular op be differentiated: a
# NaN or inf made from data alone (a graph's degree normalisation `deg.pow(-0.5)`, `deg`
# summed from a loaded adjacency) reaches no parameter, so filtering it afterwards is the fix,
# not a bug. A division counts when either side may carry a graph: the numerator's gradient
# is `1 / den`, infinite where the data denominator is 0 (`(mask * e).sum(1) / mask.sum(1)`).
def _differentiated(n: ast.AST, op: str, operand: ast.expr, ctx: Context) -> list[ast.expr]:
    """The inputs of the singular op ``n`` whose gradient its derivative scales: both sides
    of a division (the numerator's gradient is ``1 / den``, infinite where ``den`` is 0), the
    operand of a root, log or power."""
    if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div):
        return [n.left, n.right]
    if isinstance(n, ast.Call) and op in ("div", "true_divide", "divide"):
        method = isinstance(n.func, ast.Attribute) and not (
            ctx.qualified_name(n.func) or "").startswith("torch.")
        return [*n.args, *([n.func.value] if method else [])]  # type: ignore[union-attr]
    return [operand]


def _singular_point(op: str) -> str:
    if op in ("/", "div", "true_divide", "divide"):
        return "the denominator is 0"
    if op in BOUNDED:
        return "its input reaches +-1"
    return "its input reaches 0"
