"""GT524, GT525: the GradScaler protocol (mixed precision): unscale before touching the
gradients, update once for every unscale."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.rules.training_loop._base import LoopRule, function_text, related_at
from gradtrace.lint.rules.training_loop._loop import LoopFacts
from gradtrace.lint.nodes import bfs_walk, of_types

# clipping functions that read `.grad` as it is (the library's own clip helpers, Lightning's
# `clip_gradients` and accelerate's `clip_grad_norm_`, unscale first)
TORCH_CLIPS = ("torch.nn.utils.",)


def _scaled(f: LoopFacts) -> list[tuple[str, ast.stmt, ast.Call]]:
    """(scaler, statement, call) of the backward calls through ``scaler.scale(loss)``."""
    return [(b.scaler, b.stmt, b.call) for b in f.backwards if b.scaler]


def _disabled(ctx: Context, scaler: str) -> bool:
    """Every binding of ``scaler`` in the file is ``GradScaler(..., enabled=False)``: its
    ``scale`` returns the loss as it is and the gradients are not scaled."""
    made = [n.value for n in bfs_walk(ctx.tree) if isinstance(n, ast.Assign)
            and any(dotted(t) == scaler for t in n.targets)]
    return bool(made) and all(
        isinstance(v, ast.Call) and any(k.arg == "enabled" and isinstance(k.value, ast.Constant)
                                        and k.value.value is False for k in v.keywords)
        for v in made)


def _unscales(f: LoopFacts) -> list[ast.stmt] | None:
    """The simple statements of the function that call ``.unscale_(...)``; None when the
    function names ``unscale`` otherwise (a helper, a flag): where it unscales is unknown."""
    out = [s for s in f.scope.stmts if isinstance(s, (ast.Expr, ast.Assign)) and any(
        isinstance(n.func, ast.Attribute) and n.func.attr == "unscale_"  # type: ignore
        for n in of_types(s, (ast.Call,)))]
    return out or None


class ClipBeforeUnscale(LoopRule):
    """Gradients are clipped between `scaler.scale(loss).backward()` and `scaler.step(opt)`
    without `scaler.unscale_(opt)` first: the clip reads the *scaled* gradients.

    Why: with a `GradScaler` the gradients `backward()` leaves are multiplied by the loss
    scale (65536 at the start); `clip_grad_norm_(params, 1.0)` then compares that inflated
    norm with 1.0 and shrinks the gradients to norm 1.0, and `scaler.step` divides them by the
    scale again: the update is ~1/65536 of the intended one (training crawls), and the clip
    threshold changes with the dynamic scale. Nothing fails. Call `scaler.unscale_(optimizer)`
    right before the clip (PyTorch's AMP examples, "gradient clipping").
    Known limits: the backward, the clip and the step must be in one function; a clip helper
    of another library (Lightning's `clip_gradients`, accelerate's `clip_grad_norm_`) unscales
    itself and is not reported; an `unscale_` that does not surely run after the clip in the
    same pass (before it, on another branch, in a helper) silences the rule.
    """

    code = "GT524"
    gate_statements = True
    name = "clip-before-unscale"
    message = ("`{call}` clips the gradients `{scaler}.scale(...).backward()` (line {line}) "
               "left multiplied by the loss scale: the threshold applies to scaled gradients "
               "and `{scaler}.step` then shrinks the update by the scale; call "
               "`{scaler}.unscale_(optimizer)` before clipping")
    triggers = ("clip_grad",)
    function_needs = ("backward", "step", "clip_grad", ".scale(")
    examples = [
        Bad("""
            import torch
            scaler = torch.amp.GradScaler()
            for x, y in loader:
                optimizer.zero_grad()
                with torch.autocast("cuda"):
                    loss = criterion(model(x), y)
                scaler.scale(loss).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
            """, at=(8, 4)),
        Bad("""
            import torch
            scaler = torch.amp.GradScaler()
            for x, y in loader:
                optimizer.zero_grad()
                scaler.scale(criterion(model(x), y)).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.unscale_(optimizer)
                scaler.step(optimizer)
                scaler.update()
            """, at=(6, 4)),
        Good("""
            import torch
            scaler = torch.amp.GradScaler()
            for x, y in loader:
                optimizer.zero_grad()
                with torch.autocast("cuda"):
                    loss = criterion(model(x), y)
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        scaled = _scaled(f)
        if not scaled:
            return
        unscales = _unscales(f) if "unscale" in function_text(ctx, f.node) else []
        if unscales is None:
            return
        for c in f.clips:
            if not (ctx.qualified_name(c.call.func) or "").startswith(TORCH_CLIPS) \
                    or not all(f.before(c.stmt, u) for u in unscales):
                continue
            for scaler, stmt, call in scaled:
                if f.before(stmt, c.stmt) and any(
                        s.scaler == scaler and f.before(c.stmt, s.stmt) for s in f.steps) \
                        and not _disabled(ctx, scaler):
                    yield self.report(c.call, ctx, related=(
                        related_at(ctx, call, "the gradients are scaled here"),),
                        call=ctx.source(c.call.func), scaler=scaler, line=call.lineno)
                    break


class ScalerUpdateSkipped(LoopRule):
    """`scaler.unscale_(opt)` runs on every pass of the loop, but `scaler.update()` only in one
    branch of an `if`: on a pass that takes the other branch the next `unscale_` raises.

    Why: a `GradScaler` records that an optimizer was unscaled and forgets it only in
    `update()`; a second `unscale_` before it raises "unscale_() has already been called on
    this optimizer since the last update()". Skipping the step on a non-finite gradient norm
    (or on an accumulation pass) and `update()` with it crashes on the next batch. Call
    `scaler.update()` on every pass that unscaled (`scaler.step` already skips the step when
    the gradients are not finite).
    Known limits: the unscale, the update and the `if` must be in one loop of one function;
    an `if` whose test is the same as one around the `unscale_` is taken as the same choice.
    """

    code = "GT525"
    gate_statements = True
    name = "scaler-update-skipped"
    message = ("`{scaler}.update()` runs only when `{test}` is {arm}, but "
               "`{scaler}.unscale_` (line {line}) runs on every pass: on a pass that skips the "
               "update the next `unscale_` raises \"unscale_() has already been called\"; call "
               "`{scaler}.update()` on every pass")
    triggers = ("unscale_",)
    function_needs = ("unscale_", "update(")
    examples = [
        Bad("""
            import torch
            for x, y in loader:
                scaler.scale(criterion(model(x), y)).backward()
                scaler.unscale_(optimizer)
                norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                if torch.isfinite(norm):
                    scaler.step(optimizer)
                    scaler.update()
                optimizer.zero_grad()
            """, at=(8, 8)),
        Good("""
            import torch
            for x, y in loader:
                scaler.scale(criterion(model(x), y)).backward()
                scaler.unscale_(optimizer)
                norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                if torch.isfinite(norm):
                    scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        for up in f.updates:
            unscales = [u for u in f.unscales if u.receiver == up.receiver]
            if not unscales:
                continue
            for u in unscales:
                why = self._skipping_if(f, ctx, u, up)
                if why is not None:
                    test, arm = why
                    yield self.report(up.call, ctx, related=(
                        related_at(ctx, u.call, "the optimizer is unscaled here"),),
                        scaler=up.receiver, test=test, arm=arm, line=u.call.lineno)
                    return

    @staticmethod
    def _skipping_if(f: LoopFacts, ctx: Context, u: ast.AST, up: ast.AST
                     ) -> tuple[str, str] | None:
        """The ``if`` inside the loop around the unscale whose one arm holds the update and
        whose other arm neither updates nor leaves the loop, when the unscale is outside it."""
        us, ups = u.stmt, up.stmt  # type: ignore[attr-defined]
        common = [a for a, b in zip(f.loops_of(us), f.loops_of(ups)) if a is b]
        if not common:
            return None
        loop = common[-1]
        around_u = {ctx.source(i.test) for i in f.within(loop)
                    if isinstance(i, ast.If) and f.inside(us, i)}
        for i in f.within(loop):
            if not isinstance(i, ast.If) or not f.inside(ups, i) or f.inside(us, i) \
                    or ctx.source(i.test) in around_u or not f.before(us, i) \
                    or not _varies(f, i, loop):
                continue
            in_body = any(f.inside(ups, s) for s in i.body)
            other = i.orelse if in_body else i.body
            if any(_updates_or_leaves(s, up.receiver) for s in other):  # type: ignore[attr-defined]
                continue
            return ctx.source(i.test)[:50], "true" if in_body else "false"
        return None


def _varies(f: LoopFacts, i: ast.If, loop: ast.stmt) -> bool:
    """The test of ``i`` reads a name the loop binds (its target or an assignment in its body):
    a choice that can differ from pass to pass, not a setting (`if scaler is not None`)."""
    for n in bfs_walk(i.test):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            b = f.scope.binding_before(n.id, i.lineno)
            if b is not None and (b.stmt is loop or f.inside(b.stmt, loop)):
                return True
    return False


def _updates_or_leaves(stmt: ast.stmt, scaler: str) -> bool:
    """``stmt`` calls ``scaler.update()`` or leaves the loop (break, return, raise)."""
    for n in bfs_walk(stmt):
        if isinstance(n, (ast.Break, ast.Return, ast.Raise)):
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr == "update" and dotted(n.func.value) == scaler:
            return True
    return False
