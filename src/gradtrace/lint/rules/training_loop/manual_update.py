"""GT520: a hand-written update (`p.data.add_(-lr * p.grad)`) in a loop that never clears `.grad`."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.rules.training_loop._base import LoopRule, related_at
from gradtrace.lint.rules.training_loop._loop import MANUAL_ZERO_RE, LoopFacts
from gradtrace.lint.code_text import block_end, commented_out_call
from gradtrace.lint.rules.training_loop.zero_grad import moved_to_comment

# in-place methods that write an update into a tensor
UPDATE_METHODS = frozenset({"add_", "sub_", "copy_", "addcmul_", "addcdiv_"})


def _reads_grad(node: ast.AST) -> bool:
    return bool(_grad_reads(node))


def _grad_reads(node: ast.AST) -> list[ast.expr]:
    """The tensors whose ``.grad`` ``node`` reads (``p`` of ``p.grad``); the function
    ``torch.autograd.grad`` returns gradients without reading any ``.grad``."""
    return [n.value for n in walk(node) if isinstance(n, ast.Attribute) and n.attr == "grad"
            and (dotted(n.value) or "").rpartition(".")[2] != "autograd"]


def manual_update(stmt: ast.stmt) -> ast.AST | None:
    """The update in ``stmt`` when it writes a tensor from a gradient by hand:
    ``p.data.add_(-lr * p.grad)``, ``p.data -= lr * p.grad``, ``w -= lr * w.grad``,
    ``p.data = p.data - lr * p.grad``, ``p.add_(p.grad, alpha=-lr)`` (None otherwise)."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value
        if isinstance(call.func, ast.Attribute) and call.func.attr in UPDATE_METHODS \
                and _reads_grad(call) and not _reads_grad(call.func.value):
            return call
    elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, (ast.Sub, ast.Add)):
        if _reads_grad(stmt.value) and not _reads_grad(stmt.target):
            return stmt
    elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        t = stmt.targets[0]
        if isinstance(t, ast.Attribute) and t.attr == "data" and _reads_grad(stmt.value):
            return stmt
    return None


def updated(update: ast.AST) -> ast.expr:
    """The tensor an update found by :func:`manual_update` writes (``p.data`` of
    ``p.data.add_(...)``, ``w`` of ``w -= ...``)."""
    if isinstance(update, ast.Call):
        return update.func.value  # type: ignore[attr-defined]
    if isinstance(update, ast.AugAssign):
        return update.target
    return update.targets[0]  # type: ignore[attr-defined]


class ManualUpdateWithoutClearing(LoopRule):
    """A loop runs `backward()` and updates the weights by hand from `.grad`, but never clears it.

    Why: `backward()` *adds* into `.grad`. With an optimizer, `zero_grad()` resets it; a
    hand-written update (`p.data.add_(-lr * p.grad)`, `w -= lr * w.grad` under `no_grad`) needs
    its own reset: `p.grad.zero_()`, `p.grad = None` or `model.zero_grad()`. Without it, step N
    applies the sum of the gradients of steps 1..N (pytorch-facts.md#zero-grad-order).
    Known limits: any clearing in the function's code (a `zero_grad` call, `.grad = None`,
    `.grad.zero_()`, a helper named for it) is trusted; a loop that makes its tensors afresh
    on every pass is left alone.
    """

    code = "GT520"
    gate_statements = True
    name = "manual-update-without-clearing"
    message = ("`{call}` adds into `.grad` on every pass of this loop and `{update}` (line "
               "{update_line}) applies it by hand, but nothing clears `.grad`: each update "
               "uses the sum of all earlier gradients; clear them every pass (`{clear}`)")
    triggers = (".backward(",)
    function_needs = ("backward", ".grad")
    examples = [
        Bad("""
            fc = torch.nn.Linear(4, 1)
            for x, y in batches:
                output = F.smooth_l1_loss(fc(x), y)
                output.backward()
                for param in fc.parameters():
                    param.data.add_(-0.1 * param.grad)
            """, at=(4, 4)),
        Bad("""
            def fit(w, b, xs, ys, lr):
                for x, y in zip(xs, ys):
                    loss = ((x @ w + b - y) ** 2).mean()
                    loss.backward()
                    with torch.no_grad():
                        w -= lr * w.grad
                        b -= lr * b.grad
            """, at=(4, 8)),
        Good("""
            for x, y in batches:
                model.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                for p in model.parameters():
                    p.data.add_(p.grad, alpha=-lr)
            """),
        Good("""
            for x, y in batches:
                loss = ((x @ w - y) ** 2).mean()
                loss.backward()
                with torch.no_grad():
                    w -= lr * w.grad
                    w.grad = None
            """),
        Good("""
            for x, y in batches:
                w = w.detach().requires_grad_()
                loss = ((x @ w - y) ** 2).mean()
                loss.backward()
                w.data -= lr * w.grad
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        if f.steps or MANUAL_ZERO_RE.search(f.text(f.node) if not isinstance(f.node, ast.Module)
                                            else ctx.code):
            return  # an optimizer's loop (GT501's), or something clears the gradients
        for b in f.backwards:
            loop = next(iter(reversed(f.loops_of(b.stmt))), None) if b.accumulates else None
            if loop is None:
                continue
            update = next((u for s in f.within(loop) if f.inside(s, loop)
                           for u in [manual_update(s)] if u is not None), None)
            if update is None or self._fresh(f, loop, update) \
                    or self._fresh_sources(f, loop, update):
                continue
            target = dotted(updated(update)) or "p"
            base = target[:-5] if target.endswith(".data") else target
            found = self.report(b.call, ctx, related=(
                related_at(ctx, update, "the update reads the summed gradient here"),
                related_at(ctx, loop, "on every pass of this loop")),
                call=ctx.source(b.call), update=ctx.source(update).split("\n")[0],
                update_line=update.lineno, clear=f"{base}.grad = None")
            first, last = loop.lineno, block_end(ctx.lines, loop)
            hit = commented_out_call(ctx.lines, first, last, "zero_grad") or \
                commented_out_call(ctx.lines, first, last, "zero_")
            if hit is not None:
                found = moved_to_comment(found, ctx, hit[0], (
                    f"`{ctx.lines[hit[0] - 1].strip().lstrip('#').strip()}` is commented out, "
                    f"so {found.message[0].lower()}{found.message[1:]}"))
            yield found
            return

    @staticmethod
    def _fresh(f: LoopFacts, loop: ast.stmt, update: ast.AST) -> bool:
        """The updated tensor is bound anew inside the loop (a fresh leaf every pass)."""
        node = updated(update)
        while isinstance(node, ast.Attribute):
            node = node.value
        return ManualUpdateWithoutClearing._rebound(f, loop, node)

    @staticmethod
    def _rebound(f: LoopFacts, loop: ast.stmt, node: ast.AST) -> bool:
        if not isinstance(node, ast.Name):
            return False
        return any(b.stmt is not loop and f.inside(b.stmt, loop) and not isinstance(
            b.stmt, (ast.AugAssign, ast.For, ast.AsyncFor, ast.While))
            for b in f.scope.bindings.get(node.id, ()))  # `w -= ...` updates, not rebinds

    @staticmethod
    def _fresh_sources(f: LoopFacts, loop: ast.stmt, update: ast.AST) -> bool:
        """Every tensor whose ``.grad`` the update reads is a new object each pass, whose
        ``.grad`` starts empty: bound anew inside the loop (``x_s = (adv / 2 ** j)
        .requires_grad_(True)``, then ``grads += x_s.grad``: an input gradient summed over
        fresh leaves) or the loop's own target (``for step, mem in reversed_inputs``:
        recurrent-memory-transformer's replay copies ``mem.grad`` into a running buffer). The
        update reads this pass's gradient alone; nothing is summed across passes."""
        targets = {n.id for n in walk(loop.target) if isinstance(n, ast.Name)} \
            if isinstance(loop, (ast.For, ast.AsyncFor)) else set()
        owners = []
        for src in _grad_reads(update.value if isinstance(update, (ast.AugAssign, ast.Assign))
                               else update):
            while isinstance(src, ast.Attribute):
                src = src.value
            owners.append(src)
        return bool(owners) and all(
            isinstance(o, ast.Name) and o.id in targets
            or ManualUpdateWithoutClearing._rebound(f, loop, o) for o in owners)
