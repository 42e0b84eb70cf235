"""GT608: an in-place write into an output of split/chunk/unbind (or a row of a tensor being
iterated) of a tensor that carries a graph."""
from __future__ import annotations

import ast
from typing import Iterable, Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.multi_views import MULTI_VIEW_OPS, MultiViews, may_iterate_rows
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import statements
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules._gates import says_any
from gradtrace.lint.rules.inplace.out_arg import _callers_all_grad_off

NOT_WRITES = frozenset({"requires_grad_", "share_memory_", "retain_grad"})
SPLIT_WORDS = tuple(sorted(MULTI_VIEW_OPS))
SPLIT_NAMES = frozenset("torch." + op for op in MULTI_VIEW_OPS)


def _may_split(fn: ast.AST, ctx: Context) -> bool:
    """Whether ``fn`` may make a multi-output view (NOTE [split gate])."""
    return says_any(ctx, fn, SPLIT_WORDS) or any(
        may_iterate_rows(s) for s in statements(fn))


def _written(n: ast.AST) -> ast.expr | None:
    """The tensor an in-place statement or call writes: ``q *= c`` (``q``), ``q[m] = v``
    (``q``), ``q.clamp_(...)`` (``q``)."""
    if isinstance(n, ast.AugAssign) and isinstance(n.target, (ast.Name, ast.Subscript)):
        return n.target
    if isinstance(n, ast.Assign) and len(n.targets) == 1 \
            and isinstance(n.targets[0], ast.Subscript):
        return n.targets[0].value
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
        a = n.func.attr
        if a.endswith("_") and not a.startswith("_") and a not in NOT_WRITES:
            return n.func.value
    return None


def _fn_written(n: ast.AST, ctx: Context) -> ast.expr | None:
    """The tensor a torch function writes in place: ``F.relu_(x)``, ``torch.sigmoid_(x)``,
    ``F.relu(x, inplace=True)``, ``F.dropout(x, p, inplace=True)`` (not ``nn.init``, which
    runs under no_grad)."""
    if not isinstance(n, ast.Call) or not n.args or isinstance(n.args[0], ast.Starred):
        return None
    q = ctx.qualified_name(n.func) or ""
    if not q.startswith("torch.") or q.startswith("torch.nn.init"):
        return None
    last = q.rpartition(".")[2]
    if last.endswith("_") and not last.startswith("_") or any(
            k.arg == "inplace" and isinstance(k.value, ast.Constant) and k.value.value is True
            for k in n.keywords):
        return n.args[0]
    return None


class InplaceWriteToMultiOutputView(Rule):
    """An in-place write into a piece of `split`/`chunk`/`unbind` (or a row met by iterating
    a tensor) of a tensor that carries a graph: `q, k, v = qkv.split(d, -1); q *= scale`,
    `mean, log_std = self.net(s).chunk(2, -1); log_std.clamp_(-20, 2)`, `for row in logits:
    row[unk] = -inf`.

    Why: these functions return several views of one tensor, and autograd does not allow any
    of them (nor a view of one: `q.view(...)`, `q.permute(...)`, `q[0]`) to be modified in
    place while grad is enabled and the tensor requires grad: the write raises `RuntimeError:
    Output 0 of SplitBackward0 is a view and is being modified inplace. This view is the output
    of a function that returns multiple views. Such functions do not allow the output views to
    be modified inplace.` (NOTE [multi-output views]; checked on torch 2.13, with the
    look-alikes that pass: `tensor_split`, a piece `.clone()`d first, the same write under
    `no_grad`). Write out of place: `q = q * scale`, `log_std = log_std.clamp(-20, 2)`,
    `logits[:, unk] = -inf` on the whole tensor (when nothing saved it).
    A `reshape`/`flatten` of a piece (method or `torch.<op>`) into more than one dimension is
    a view whenever the strides allow one (a head split `q.reshape(b, n, h, d)` always is),
    and a helper of the file whose every `return` is a
    view of its parameter (`def split_heads(x, n): return torch.reshape(x, ...)`) hands back a
    view of the piece it is given: both are followed, also through
    `q, k, v = map(lambda t: to_heads(t, h), (q, k, v))` (or `map(split_heads, (q, k, v))`):
    lucidrains/bottleneck-transformer-pytorch#14.
    Known limits: the split tensor must come from a module call of the file (`self.proj(x)`,
    `model(x)`, or a `torch.bmm`/`torch.cat`/... of one) through the names and views of one
    function, or be a function's parameter that a call of it passes a tensor surely requiring
    grad (Score-CAM's `denormalize(input_)` of an input made with `requires_grad_()`;
    NOTE [values that require grad]); a reshape into one dimension (`t.reshape(-1)`, which copies
    a piece of a last-dimension split) is not followed, and a reshape that must copy for
    another reason (merging the split dimension with a preceding one) is reported all the same.
    `F.relu_(q)` and `F.relu(q, inplace=True)` write `q` too.
    """

    code = "GT608"
    name = "inplace-write-to-multi-output-view"
    message = ("`{name}` is a view made by `{how}` (line {line}) of a tensor that carries a "
               "graph: this in-place write raises 'This view is the output of a function that "
               "returns multiple views ... do not allow the output views to be modified "
               "inplace'; write out of place (`x = x * c`, `x = x.clamp(...)`)")
    # the write's words: a function without one holds no write (NOTE [triggers])
    triggers = ("_(", "+=", "-=", "*=", "/=", "] =", "inplace")
    gate_statements = "function"
    # what makes the view: a split call or a `for` (NOTE [split gate]; NOTE [function requires])
    function_requires = (*SPLIT_WORDS, "for")
    examples = [
        Bad("""
            import torch
            import torch.nn as nn

            class Attention(nn.Module):
                def __init__(self, d):
                    super().__init__()
                    self.qkv = nn.Linear(d, 3 * d)

                def forward(self, x):
                    q, k, v = self.qkv(x).chunk(3, dim=-1)
                    q *= q.shape[-1] ** -0.5
                    return torch.softmax(q @ k.transpose(-2, -1), -1) @ v
            """, at=(11, 8)),
        Bad("""
            import torch
            import torch.nn as nn

            class Decoder(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.head = nn.Linear(8, 30)

                def step(self, h, unk):
                    logits = self.head(h)[:, -1, :]
                    for row in logits:
                        row[unk] = -float("inf")
                    return logits.softmax(-1)
            """, at=(12, 12)),
        Good("""
            import torch
            import torch.nn as nn

            class Attention(nn.Module):
                def __init__(self, d):
                    super().__init__()
                    self.qkv = nn.Linear(d, 3 * d)

                def forward(self, x):
                    q, k, v = self.qkv(x).chunk(3, dim=-1)
                    q = q * q.shape[-1] ** -0.5
                    return torch.softmax(q @ k.transpose(-2, -1), -1) @ v
            """),
        Bad("""
            import torch
            import torch.nn as nn

            def split_heads(x, n):
                b, l, c = x.shape
                return x.reshape(b, l, n, c // n)

            class Attention(nn.Module):
                def __init__(self, d):
                    super().__init__()
                    self.qkv = nn.Linear(d, 3 * d)

                def forward(self, x):
                    q, k, v = self.qkv(x).chunk(3, dim=-1)
                    q = split_heads(q, 4)
                    q *= q.shape[-1] ** -0.5
                    return q.sum() + k.sum() + v.sum()
            """, at=(16, 8)),
        Bad("""
            import torch.nn as nn

            class Attention(nn.Module):
                def __init__(self, dim=8, heads=2):
                    super().__init__()
                    self.heads = heads
                    self.to_qkv = nn.Linear(dim, dim * 3)

                def forward(self, x):
                    b, n, _ = x.shape
                    q, k, v = self.to_qkv(x).chunk(3, dim=-1)
                    q, k, v = map(lambda t: t.view(b, n, self.heads, -1).transpose(1, 2),
                                  (q, k, v))
                    q *= q.shape[-1] ** -0.5
                    return (q @ k.transpose(-1, -2)).softmax(-1) @ v
            """, at=(14, 8)),
        Good("""
            import torch
            import torch.nn as nn

            class Decoder(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.head = nn.Linear(8, 30)

                @torch.no_grad()
                def step(self, h, unk):
                    logits = self.head(h)[:, -1, :]
                    for row in logits:
                        row[unk] = -float("inf")
                    return logits.softmax(-1)
            """),
    ]

    def visit_AugAssign(self, node: ast.AugAssign, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> Iterable[Finding]:
        # only `x[i] = v` writes (``_written``): the other assignments (in an `__init__`,
        # most) are let go here, before two generators and the tests of ``_check`` are made
        if len(node.targets) != 1 or node.targets[0].__class__ is not ast.Subscript:
            return ()
        return self._check(node, ctx)

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    def _check(self, n: ast.AST, ctx: Context) -> Iterator[Finding]:
        target = _fn_written(n, ctx) or _written(n)
        fn = ctx.function
        if target is None or fn is None or ctx.grad_disabled is not None:
            return
        # NOTE [split gate]: a view is found only through a split call or a `for` statement
        # of ``fn`` itself (its scope's bindings, or the written expression): a split call
        # spells its op (`x.chunk(2)`, `torch.split(x, 3)`) unless an import renamed it
        # (`from torch import chunk as ck`), and a `for` over a tensor's rows has the shape
        # of ``may_iterate_rows`` (not `for i in range(n)`, `for blk in self.blocks`);
        # without either, ``view_of_split`` is None and the scope need not be built
        if not ctx.memo("gt608-may-split", fn, lambda: _may_split(fn, ctx)) \
                and SPLIT_NAMES.isdisjoint(ctx.imports.aliases.values()):
            return
        views = ctx.memo("gt608-views", fn, lambda: MultiViews(fn, ctx))
        stmt = views.scope.statement_of(n)
        line = stmt.lineno if stmt is not None else n.lineno  # type: ignore[attr-defined]
        made = views.view_of_split(target, line)
        if made is None or ctx.memo("gt608-callers-off", fn,
                                    lambda: _callers_all_grad_off(ctx, fn)):
            return
        yield self._emit(n, target, made, ctx)

    def _emit(self, n: ast.AST, target: ast.AST, made: ast.AST, ctx: Context) -> Finding:
        how = "iterating a tensor" if isinstance(made, ast.For) else \
            f"{ctx.source(made.func)}(...)" if isinstance(made, ast.Call) else "a split"
        rel = [Related(ctx.path, made.lineno,  # type: ignore[attr-defined]
                       "several views of one tensor are made here", ctx.column(made))]
        return self.report(n, ctx, related=rel, name=ctx.source(target)[:40], how=how[:40],
                           line=made.lineno)  # type: ignore[attr-defined]
