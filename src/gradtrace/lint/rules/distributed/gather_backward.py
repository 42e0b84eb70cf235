"""GT616: a hand-written all-gather Function whose backward keeps this rank's slice of the
incoming gradients without summing them over the ranks."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule

GATHERS = frozenset({"torch.distributed.all_gather", "torch.distributed.all_gather_into_tensor",
                     "torch.distributed.distributed_c10d.all_gather",
                     "torch.distributed.distributed_c10d.all_gather_into_tensor"})
# what carries the other ranks' gradients back (any other collective of torch.distributed)
LOCAL = frozenset({"get_rank", "get_world_size", "is_initialized", "is_available", "barrier",
                   "get_backend", "get_process_group_ranks", "new_group"})


class GatherBackwardKeepsLocalGradient(Rule):
    """A custom `autograd.Function` gathers a tensor from every rank (`dist.all_gather`) and its
    `backward` returns this rank's slice of the incoming gradients (`grads[dist.get_rank()]`)
    without summing them over the ranks.

    Why: each rank's loss reads every rank's gathered slice (the other ranks' embeddings are
    its negatives in SimCLR/NT-Xent, CLIP), so the gradient of rank r's slice is the sum of
    what every rank's loss sends it. `backward` on rank r only holds what its own loss sends;
    keeping `grads[rank]` alone drops the rest, and after DDP averages the ranks the model
    follows another gradient than the one of the global batch's loss, silently (lightly
    PR#1531; checked on torch 2.13 with two gloo ranks). `torch.distributed.nn.all_gather`
    sums them (its backward is a reduce-scatter). All-reduce the stacked gradients before
    taking the slice (`g = torch.stack(grads); dist.all_reduce(g); return g[rank]`), or use
    `torch.distributed.nn.all_gather`.
    Known limits: the `Function` must gather in its `forward` and index the gradients given
    to `backward` (or their `chunk`/`split` per rank) by a rank read from `torch.distributed` (`get_rank()`, or a name bound to
    it); a `backward` that calls any other collective is trusted.
    """

    code = "GT616"
    name = "gather-backward-keeps-local-gradient"
    message = ("`{expr}` keeps only this rank's own loss's gradient for its gathered slice: "
               "the gradients the other ranks' losses send it are dropped (no all-reduce in "
               "`backward`), so the model trains on another gradient than the global batch's; "
               "all-reduce the gradients before taking the slice, or use "
               "`torch.distributed.nn.all_gather`")
    triggers = ("all_gather",)
    examples = [
        Bad("""
            import torch
            import torch.distributed as dist

            class Gather(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    out = [torch.zeros_like(x) for _ in range(dist.get_world_size())]
                    dist.all_gather(out, x)
                    return tuple(out)

                @staticmethod
                def backward(ctx, *grads):
                    return grads[dist.get_rank()]
            """, at=(13, 8)),
        Good("""
            import torch
            import torch.distributed as dist

            class Gather(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    out = [torch.zeros_like(x) for _ in range(dist.get_world_size())]
                    dist.all_gather(out, x)
                    return tuple(out)

                @staticmethod
                def backward(ctx, *grads):
                    all_grads = torch.stack(grads)
                    dist.all_reduce(all_grads)
                    return all_grads[dist.get_rank()]
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        if not any((ctx.qualified_name(b) or "").endswith("autograd.Function")
                   for b in node.bases):
            return
        methods = {m.name: m for m in node.body
                   if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
        fwd, bwd = methods.get("forward"), methods.get("backward")
        if fwd is None or bwd is None or not any(
                isinstance(n, ast.Call) and (ctx.qualified_name(n.func) or "") in GATHERS
                for n in walk(fwd)):
            return
        if any(isinstance(n, ast.Call) and (ctx.qualified_name(n.func) or "").startswith(
                "torch.distributed.") and (ctx.qualified_name(n.func) or "").rpartition(".")[2]
                not in LOCAL for n in walk(bwd)):
            return  # a collective in backward: the gradients are summed somehow
        grads = _grad_params(bwd)
        ranks = _rank_names(bwd, ctx)
        for n in walk(bwd):
            if isinstance(n, ast.Subscript) and _of_grads(n.value, grads) \
                    and _reads_rank(n.slice, ranks, ctx):
                stmt = next((s for s in walk(bwd) if isinstance(s, ast.stmt)
                             and s is not bwd and s.lineno <= n.lineno <= (s.end_lineno or 0)
                             and not isinstance(s, (ast.If, ast.For, ast.With, ast.Try))),
                            None)
                gather = next(c for c in walk(fwd) if isinstance(c, ast.Call)
                              and (ctx.qualified_name(c.func) or "") in GATHERS)
                yield self.report(stmt or n, ctx, related=[Related(
                    ctx.path, gather.lineno, "every rank's tensor is gathered here",
                    ctx.column(gather))], expr=ctx.source(n))
                return


def _grad_params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The names ``backward`` receives the output gradients under (after ``ctx``)."""
    a = fn.args
    names = {x.arg for x in (*a.posonlyargs, *a.args)[1:]}
    if a.vararg is not None:
        names.add(a.vararg.arg)
    return names


def _of_grads(e: ast.AST, grads: set[str]) -> bool:
    """``grads`` itself, or its pieces per rank (``grad.chunk(world)``, ``grad.split(n)``)."""
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr in ("chunk", "split", "tensor_split", "unbind"):
        e = e.func.value
    return isinstance(e, ast.Name) and e.id in grads


def _rank_names(fn: ast.AST, ctx: Context) -> set[str]:
    """Names bound in ``fn`` to ``torch.distributed.get_rank()``."""
    return {t.id for s in walk(fn) if isinstance(s, ast.Assign) and _is_rank(s.value, ctx)
            for t in s.targets if isinstance(t, ast.Name)}


def _is_rank(e: ast.AST, ctx: Context) -> bool:
    return isinstance(e, ast.Call) and (ctx.qualified_name(e.func) or "").startswith(
        "torch.distributed.") and (dotted(e.func) or "").endswith("get_rank")


def _reads_rank(e: ast.AST, ranks: set[str], ctx: Context) -> bool:
    return any(_is_rank(n, ctx) or isinstance(n, ast.Name) and n.id in ranks for n in walk(e))
