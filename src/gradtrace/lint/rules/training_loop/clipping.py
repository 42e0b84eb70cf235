"""GT504, GT514: where gradients are clipped relative to backward() and step()."""
from __future__ import annotations

from typing import Iterator

import ast

from gradtrace.lint.analysis.callees import resolve
from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.rules.training_loop._base import LoopRule, related_at
from gradtrace.lint.analysis.graph_deps import graphs
from gradtrace.lint.rules.training_loop._loop import LoopFacts, calls_in, facts


class ClipGradAfterStep(LoopRule):
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
    function_needs = ("step", "clip_grad")
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
                        related_at(ctx, s.call, "the unclipped gradients were applied here"),),
                        call=ctx.source(c.call.func), opt=s.optimizer, step_line=s.call.lineno)
                    break


class ClipGradBeforeBackward(LoopRule):
    """Gradients are clipped before `backward()` computes the ones the step applies.

    Why: clipping rescales what `.grad` holds *now*: before `backward()` that is the previous
    step's (already applied) gradients, or nothing after `zero_grad()`; `backward()` then
    writes fresh, unclipped gradients and `step()` applies them, so training runs exactly as
    without clipping. The same holds for a clip inside a function that computes and returns
    the loss (a `training_step`), when its caller runs `backward()` on that loss afterwards,
    and inside a LightningModule's `training_step`, which Lightning runs before `backward()`,
    and in a helper that clips and then backwards when its caller steps right after the call.
    Clip between `backward()` and `step()` (with Lightning: the Trainer's
    `gradient_clip_val`, or `on_before_optimizer_step`).
    Known limits: the caller must be in the same file and call the function by its name
    (`model.training_step(batch)`, `self.compute_loss(x)`, `compute_loss(x)`).
    """

    code = "GT514"
    gate_statements = True
    name = "clip-grad-before-backward"
    message = ("`{call}` runs before `backward()` ({where}) computes the gradients that the "
               "step applies: it clips the previous or cleared `.grad` and the step uses "
               "unclipped gradients; clip after `backward()`, right before the step")
    triggers = ("clip_grad",)
    function_needs = ("clip_grad",)
    examples = [
        Bad("""
            import torch
            for x, y in loader:
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                loss.backward()
                optimizer.step()
            """, at=(5, 4)),
        Bad("""
            import torch
            class Net(torch.nn.Module):
                def training_step(self, batch):
                    loss = self.loss_fn(self(batch[0]), batch[1])
                    torch.nn.utils.clip_grad_norm_(self.parameters(), 1.0)
                    return loss

            def fit(model, optimizer, loader):
                for batch in loader:
                    optimizer.zero_grad()
                    loss = model.training_step(batch)
                    loss.backward()
                    optimizer.step()
            """, at=(5, 8)),
        Good("""
            import torch
            for x, y in loader:
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
            """),
        Good("""
            import torch
            class Net(torch.nn.Module):
                def clip(self):
                    torch.nn.utils.clip_grad_norm_(self.parameters(), 1.0)

            def fit(model, optimizer, loader):
                for batch in loader:
                    optimizer.zero_grad()
                    model.loss(batch).backward()
                    model.clip()
                    optimizer.step()
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        acc = [b for b in f.backwards if b.accumulates]
        for c in f.clips:
            if any(f.before(b.stmt, c.stmt) for b in acc):
                continue
            if acc:
                b = next((b for b in acc if f.before(c.stmt, b.stmt) and not any(
                    f.before(c.stmt, s.stmt) and f.before(s.stmt, b.stmt) for s in f.steps)
                    and any(f.before(b.stmt, s.stmt) for s in f.steps)), None)
                rel: tuple[Related, ...] = ()
                if b is None and not f.steps:  # the caller steps (NOTE [stepping caller])
                    b = next((b for b in acc if f.before(c.stmt, b.stmt)), None)
                    rel = _caller_step(f, ctx) if b is not None else ()
                    b = b if rel else None
                if b is not None and not any(f.before(b.stmt, c2.stmt) for c2 in f.clips):
                    yield self.report(c.call, ctx, related=(
                        related_at(ctx, b.call, "the gradients the step applies are made here"),
                        *rel), call=ctx.source(c.call.func), where=f"line {b.call.lineno}")
                continue
            if f.steps or not _returns_value(f.node) or f.ctx.mentions("manual_backward"):
                continue
            where = _caller_backward(f, ctx) or _lightning_step(f, ctx)
            if where is not None:
                line, rel = where
                yield self.report(c.call, ctx, related=rel, call=ctx.source(c.call.func),
                                  where=line)


def _returns_value(node: ast.AST) -> bool:
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
        isinstance(n, ast.Return) and n.value is not None for n in walk(node))


def _callers(ctx: Context) -> dict[str, list[tuple[ast.AST, ast.stmt, ast.Call]]]:
    """Calls of this file by the called name's last part: (enclosing function, statement,
    call), computed once per file."""
    def make() -> dict[str, list[tuple[ast.AST, ast.stmt, ast.Call]]]:
        out: dict[str, list[tuple[ast.AST, ast.stmt, ast.Call]]] = {}
        for fn in walk(ctx.tree):
            if not isinstance(fn, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for stmt in ctx.scope(fn).stmts:
                for call in calls_in(stmt):
                    name = (dotted(call.func) or "").rpartition(".")[2]
                    if name:
                        out.setdefault(name, []).append((fn, stmt, call))
        return out
    return ctx.memo("gt514-callers", ctx.tree, make)


def _caller_backward(f: LoopFacts, ctx: Context) -> tuple[str, tuple[Related, ...]] | None:
    """A caller of the function that binds its result and backwards it afterwards."""
    name = f.node.name  # type: ignore[attr-defined]
    for fn, stmt, call in _callers(ctx).get(name, ()):
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            continue
        result = dotted(stmt.targets[0])
        cf = facts(ctx, fn)
        for b in cf.backwards:
            if result and b.accumulates and b.loss is not None and cf.before(stmt, b.stmt) \
                    and any(d.stmt is stmt
                            for d in graphs(cf.scope).deps(b.loss, b.stmt.lineno).bindings):
                return (f"line {b.call.lineno}, after `{name}` returned `{result}`",
                        (related_at(ctx, call, f"`{name}` is called here"),
                         related_at(ctx, b.call, "the gradients the step applies are made here")))
    return None


def _caller_step(f: LoopFacts, ctx: Context) -> tuple[Related, ...]:
    """# NOTE [stepping caller]
    A function that clips and then backwards but steps nothing itself (FAMO's
    ``backward(losses, shared_parameters)``): a caller of this file that calls it and then
    steps an optimizer, with no clip between the call and the step, applies the gradients the
    function's backward made, unclipped. The related places: that call and that step."""
    name = getattr(f.node, "name", None)
    for fn, stmt, call in _callers(ctx).get(name or "", ()) if name else ():
        got = resolve(ctx, fn, call)  # the call runs this very function
        if fn is f.node or got is None or got[0] is not f.node:
            continue
        cf = facts(ctx, fn)
        step = next((s for s in cf.steps if cf.before(stmt, s.stmt)), None)
        if step is not None and not any(cf.before(stmt, c.stmt) and cf.before(c.stmt, step.stmt)
                                        for c in cf.clips):
            return (related_at(ctx, call, f"`{name}` is called here"),
                    related_at(ctx, step.call, "and the step applies its gradients here"))
    return ()


def _lightning_step(f: LoopFacts, ctx: Context) -> tuple[str, tuple[Related, ...]] | None:
    """``training_step`` of a LightningModule with automatic optimization: Lightning runs
    ``backward()`` on what it returns."""
    node = f.node
    if getattr(node, "name", "") != "training_step":
        return None
    cls = ctx.analysis.class_of(node)
    if cls is None or "automatic_optimization" in ctx.code:
        return None
    if not any((ctx.qualified_name(b) or dotted(b) or "").endswith("LightningModule")
               for b in cls.node.bases):
        return None
    return ("which Lightning runs after `training_step` returns the loss", ())
