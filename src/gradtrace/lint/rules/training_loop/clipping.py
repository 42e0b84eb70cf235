"""GT504: where gradients are clipped relative to backward() and step()."""
from __future__ import annotations

from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.rules.training_loop._loop import LoopFacts
from gradtrace.lint.rules.training_loop.zero_grad import _LoopRule, _related


class ClipGradAfterStep(_LoopRule):
    """Gradients are clipped after `optimizer.step()`, so the clipping changes nothing.

    Why: `step()` has already applied the unclipped gradients; the clipped ones are then
    cleared by the next `zero_grad()` (or added to by the next `backward()`). Clip between
    `backward()` and `step()` (after `scaler.unscale_(optimizer)` with AMP).
    Known limits: a `clip_grad_norm_` with an infinite max norm (used to measure the norm) is
    not reported.
    """

    code = "GT504"
    gate_statements = True
    name = "clip-grad-after-step"
    message = ("`{call}` runs after `{opt}.step()` (line {step_line}) already applied the "
               "unclipped gradients; clip between `backward()` and `step()`")
    triggers = ("clip_grad",)
    needs = ("step", "clip_grad")
    examples = [
        Bad("""
            import torch
            for x, y in loader:
                optimizer.zero_grad()
                criterion(model(x), y).backward()
                optimizer.step()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            """, at=(6, 4)),
        Good("""
            import torch
            for x, y in loader:
                optimizer.zero_grad()
                criterion(model(x), y).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
            """),
        Good("""
            import torch
            d_loss.backward()
            opt_d.step()
            torch.nn.utils.clip_grad_norm_(gen.parameters(), 1.0)
            opt_g.step()
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        acc = [b for b in f.backwards if b.accumulates]
        for c in f.clips:
            if "inf" in ctx.source(c.call) or "1e" in ctx.source(c.call):
                continue
            if any(f.before(c.stmt, s2.stmt) for s2 in f.steps):
                continue
            for s in f.steps:
                if f.before(s.stmt, c.stmt) and not any(
                        f.before(s.stmt, b.stmt) and f.before(b.stmt, c.stmt) for b in acc):
                    yield self.report(c.call, ctx, related=(
                        _related(ctx, s.call, "the unclipped gradients were applied here"),),
                        call=ctx.source(c.call.func), opt=s.optimizer, step_line=s.call.lineno)
                    break
