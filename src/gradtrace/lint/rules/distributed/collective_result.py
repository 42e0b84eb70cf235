"""GT465: the result of an autograd-aware (out-of-place) collective is dropped."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule

# the differentiable collectives of `torch.distributed.nn` (also `.functional`) and the
# functional collectives: each returns a new tensor (or a tuple of them) and leaves its input
# as it was, unlike their in-place c10d namesakes `dist.all_reduce(t)`, `dist.broadcast(t, 0)`
# (checked on torch 2.13: `torch.distributed.nn.all_reduce` clones its input first)
OUT_OF_PLACE = frozenset({
    f"torch.distributed.nn.{f}" for f in ("all_reduce", "broadcast", "reduce", "all_gather")
} | {
    f"torch.distributed.nn.functional.{f}"
    for f in ("all_reduce", "broadcast", "reduce", "all_gather")
} | {
    f"torch.distributed._functional_collectives.{f}" for f in (
        "all_reduce", "broadcast", "all_gather_tensor", "reduce_scatter_tensor",
        "all_reduce_coalesced")
})


class CollectiveResultDiscarded(Rule):
    """`torch.distributed.nn.all_reduce(t)` written as a statement of its own: the reduced
    tensor is thrown away and `t` keeps this rank's local value.

    Why: the autograd-aware collectives (`torch.distributed.nn.all_reduce`, `.broadcast`,
    `.all_gather`, their `torch.distributed.nn.functional` spellings, and the functional
    collectives of `torch.distributed._functional_collectives`) return their result, unlike
    the in-place `dist.all_reduce(t)` they are named after: `torch.distributed.nn.all_reduce`
    reduces a clone of its input (checked on torch 2.13). Called for its effect, it changes
    nothing: a routing count meant to be global stays each rank's own, a statistic meant to be
    synchronised differs across ranks, and nothing fails (microsoft/ltp-megatron-lm#68). Assign
    the result (`t = torch.distributed.nn.all_reduce(t)`, which also backpropagates through
    the reduction), or call the in-place `dist.all_reduce(t)` on a value that needs no
    gradient through it.
    """

    code = "GT465"
    name = "collective-result-discarded"
    message = ("`{call}` returns the {what} result and leaves `{target}` as it was; as a "
               "statement of its own the result is thrown away and `{target}` keeps this rank's "
               "local value: assign it (`{target} = {func}(...)`) or use the in-place "
               "`torch.distributed.{short}`")
    triggers = ("all_reduce", "broadcast", "all_gather", "reduce_scatter", "reduce(")
    gate_statements = True
    examples = [
        Bad("""
            import torch
            import torch.distributed.nn

            def balance_loss(probs, counts):
                torch.distributed.nn.all_reduce(counts)
                return (probs.mean(0) * counts / counts.sum()).sum()
            """, at=(5, 4)),
        Bad("""
            from torch.distributed.nn.functional import all_reduce

            class Stats:
                def sync(self, total):
                    all_reduce(total)
                    return total
            """, at=(5, 8)),
        Good("""
            import torch
            import torch.distributed.nn

            def balance_loss(probs, counts):
                counts = torch.distributed.nn.all_reduce(counts)
                return (probs.mean(0) * counts / counts.sum()).sum()
            """),
        Good("""
            import torch.distributed as dist

            def balance_loss(probs, counts):
                dist.all_reduce(counts)
                return (probs.mean(0) * counts / counts.sum()).sum()
            """),
    ]

    def visit_Expr(self, node: ast.Expr, ctx: Context) -> Iterator[Finding]:
        call = node.value
        if not isinstance(call, ast.Call) or not call.args:
            return
        qual = ctx.qualified_name(call.func) or ""
        if qual not in OUT_OF_PLACE:
            return
        func = ctx.source(call.func)
        short = qual.rpartition(".")[2].replace("_tensor", "").replace("_coalesced", "")
        what = "gathered" if "gather" in short else "reduced" if "reduce" in short else \
            "broadcast"
        yield self.report(node, ctx, call=" ".join(ctx.source(call).split())[:60],
                          target=ctx.source(call.args[0])[:40], what=what, func=func,
                          short=short)
