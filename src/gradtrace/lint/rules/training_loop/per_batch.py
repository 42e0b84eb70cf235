"""GT526: a scheduler whose period is counted in epochs, stepped in the batch loop."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.kinds import SCHEDULER, Kind
from gradtrace.lint.analysis.vocabulary import is_epoch_count_name
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.rules.training_loop._base import LoopRule, related_at
from gradtrace.lint.rules.training_loop._loop import LoopFacts
from gradtrace.lint.rules.training_loop._per_batch_calls import stepped_per_batch
from gradtrace.lint.rules.training_loop.schedule import optimizer_steps
from gradtrace.lint.nodes import bfs_walk

# schedulers whose period argument (position 1 or keyword) counts `step()` calls
PERIODS = {"StepLR": "step_size", "MultiStepLR": "milestones", "CosineAnnealingLR": "T_max"}


def _period(call: ast.Call, ctx: Context) -> tuple[str, ast.expr] | None:
    """(class, period argument) of a ``torch.optim.lr_scheduler`` constructor call."""
    q = ctx.qualified_name(call.func) or ""
    last = q.rpartition(".")[2]
    if not q.startswith("torch.optim.lr_scheduler.") or last not in PERIODS:
        return None
    kw = next((k.value for k in call.keywords if k.arg == PERIODS[last]), None)
    arg = kw if kw is not None else (call.args[1] if len(call.args) > 1 else None)
    return (last, arg) if arg is not None else None


# NOTE [decay per update]
# `StepLR(opt, step_size=1, gamma=0.85)` multiplies the rate by `gamma` at every `step()` call:
# the per-epoch decay it is written for. Stepped in the batch loop next to the optimizer (under
# the gradient-accumulation `if` that steps the optimizer too: llama-recipes' train_utils),
# it decays at every update, and after a hundred updates the rate is `0.85 ** 100` (1e-7) of
# its start. A `gamma` close to 1 (above 0.95: a per-update decay on purpose) is left alone.
UNIT_DECAY_MAX = 0.95


def _unit_decay(built: ast.AST, got: tuple[str, ast.expr]) -> str | None:
    """The reason, when a ``StepLR`` decays by a large factor at every call (``step_size=1``,
    ``gamma`` at most :data:`UNIT_DECAY_MAX`, 0.1 when not given)."""
    cls, period = got
    if cls != "StepLR" or not isinstance(built, ast.Call) or not (
            isinstance(period, ast.Constant) and period.value == 1):
        return None
    g = next((k.value for k in built.keywords if k.arg == "gamma"), None)
    if g is None and len(built.args) > 2:
        g = built.args[2]
    gamma = 0.1 if g is None else g.value if isinstance(g, ast.Constant) else None
    if not isinstance(gamma, (int, float)) or isinstance(gamma, bool) \
            or not 0 < gamma <= UNIT_DECAY_MAX:
        return None
    return "step_size=1"


def _names(e: ast.AST) -> set[str]:
    """The values ``e`` reads: names and attributes, an entry of a mapping under a constant
    key as ``args.key`` (``args['decay_step']`` is not ``args['n_epochs']``); not the
    callees (``int``, ``range``), nor the mapping itself, nor the objects an attribute is
    read from (``cfg.training.n_steps`` reads neither ``cfg`` nor ``cfg.training``: a
    milestone of ``cfg.training.scheduler`` is no epoch count because the loop's bound is
    computed from ``cfg.training.n_steps``)."""
    out: set[str] = set()
    skip: set[int] = set()
    for n in bfs_walk(e):
        if isinstance(n, ast.Call):
            skip.add(id(n.func))
        elif isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) \
                and isinstance(n.slice.value, str) and (d := dotted(n.value)):
            skip.add(id(n.value))
            out.add(f"{d}.{n.slice.value}")
        elif isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Load) \
                and id(n) not in skip and (d := dotted(n)):
            out.add(d)
            if isinstance(n, ast.Attribute):
                skip.add(id(n.value))
    return out


def _per_iteration(e: ast.AST) -> bool:
    """The expression counts iterations: ``len(...)`` or a product of two non-constants
    (``epochs * len(loader)``, ``epochs * steps_per_epoch``)."""
    for n in bfs_walk(e):
        if isinstance(n, ast.Call) and dotted(n.func) == "len":
            return True
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult) and not (
                isinstance(n.left, ast.Constant) or isinstance(n.right, ast.Constant)):
            return True
    return False


def epoch_counted(period: ast.expr, outer: ast.stmt, f: LoopFacts,
                  vocab: bool = True) -> str | None:
    """The name by which ``period`` counts epochs: the bound of the epoch loop ``outer``
    (``for epoch in range(n_epochs)``, ``StepLR(opt, n_epochs // 3)``), else (``vocab``) a
    name that reads as a number of epochs (NOTE: vocabulary, the last resort). None: not
    seen to."""
    if _per_iteration(period):
        return None
    names = _names(period)
    local = f.scope.statement_of(period) is not None
    for name in list(names):  # `step = args.epochs // 2; StepLR(opt, step)`
        b = f.scope.binding_before(name, period.lineno) if local and "." not in name else None
        if b is not None and b.value is not None and not isinstance(b.stmt, (ast.For, ast.AsyncFor)):
            if _per_iteration(b.value):
                return None
            names |= _names(b.value)
    it = getattr(outer, "iter", None)
    if isinstance(it, ast.Call) and dotted(it.func) == "range":
        # `self.n_epochs` in the loop, `n_epochs` given to the scheduler in `__init__`
        raw = {n for a in it.args for n in _names(a)}
        for name in list(raw):  # `epochs = args.epochs; for epoch in range(epochs)`
            b = f.scope.binding_before(name, it.lineno) if "." not in name else None
            if b is not None and b.value is not None and not isinstance(b.stmt, ast.For):
                raw |= _names(b.value)
        bound = {n.rpartition(".")[2] for n in raw} - {"self"}
        hit = sorted(n for n in names if n.rpartition(".")[2] in bound)
        if hit:
            return hit[0]
    return next((n for n in sorted(names) if vocab and is_epoch_count_name(n)), None)


class EpochSchedulerSteppedPerBatch(LoopRule):
    """A `StepLR` / `MultiStepLR` / `CosineAnnealingLR` whose period is a number of epochs
    is stepped inside the batch loop, on every optimizer step.

    Why: these schedulers count calls of their `step()`, not epochs; built with
    `step_size=epochs // 2` (or milestones at 50% and 75% of the epochs, or `T_max=epochs`)
    and stepped every batch, the decay meant for the middle of training happens after a few
    batches: the learning rate drops by `gamma` again and again in the first epoch and
    training stalls (SRGAN-PyTorch#1). Nothing fails. Step the scheduler once per epoch,
    after the batch loop, or give it a period in iterations (`epochs * len(loader)`).
    Known limits: the epoch loop and the batch loop must be in one function, or the step (with
    the optimizer's, outside every loop of its function) in a function they run once per batch
    pass (NOTE [loops through calls]); the period must
    be read from the epoch loop's bound or from a name counting epochs (`num_epochs`,
    `args.epochs`), or be one call with a large decay (`StepLR(opt, step_size=1, gamma=0.85)`:
    NOTE [decay per update]); a step under an `if` in the batch loop is not reported, unless
    that `if` steps the optimizer too (the gradient-accumulation branch: the schedule then
    advances at every update).
    """

    code = "GT526"
    name = "epoch-scheduler-stepped-per-batch"
    message = ("`{call}` runs on every pass of the batch loop, but `{cls}`'s period counts "
               "epochs (`{period}`, line {line}): the schedule advances once per batch and "
               "the learning rate decays after a few batches; step it once per epoch, after "
               "the batch loop")
    triggers = ("StepLR", "CosineAnnealingLR")
    function_needs = ("step",)
    examples = [
        Bad("""
            import torch
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=num_epochs // 3)
            for epoch in range(num_epochs):
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
                    scheduler.step()
            """, at=(8, 8)),
        Good("""
            import torch
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=num_epochs // 3)
            for epoch in range(num_epochs):
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
                scheduler.step()
            """),
        Good("""
            import torch
            scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
                optimizer, T_max=num_epochs * len(loader))
            for epoch in range(num_epochs):
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
                    scheduler.step()
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        steps = None
        for stmt in f.scope.stmts:
            loops = f.loops_of(stmt)
            if not loops:
                yield from self._through_calls(stmt, f, ctx)
            if len(loops) < 2:
                continue
            for call, k, got in _scheduler_steps(stmt, f, ctx):
                inner = loops[-1]
                if steps is None:
                    steps = optimizer_steps(f, ctx)
                if any(isinstance(s, ast.If) and s is not stmt and f.inside(stmt, s)
                       and f.inside(s, inner) and not any(  # NOTE [decay per update]
                           f.inside(st, s) for _, st, _ in steps) for s in f.within(inner)):
                    continue  # stepped on some passes only (`if i == len(loader) - 1`)
                if not any(f.loops_of(st)[-1:] == (inner,) for _, st, _ in steps):
                    continue  # not the loop that steps the optimizer: not a batch loop
                if epoch_counted(got[1], inner, f, vocab=False) is not None:
                    continue  # the stepping loop runs the period's bound: the epoch loop
                outer = loops[-2]  # (P-DARTS: `for epoch in range(epochs)` in a stage loop)
                why = epoch_counted(got[1], outer, f) or _unit_decay(k.node, got)
                if why is None:
                    continue
                yield self._report(call, k.node, got, ctx)

    def _report(self, call: ast.Call, built: ast.Call, got: tuple[str, ast.expr],
                ctx: Context) -> Finding:
        return self.report(call, ctx, related=(related_at(ctx, built, "its period is set here"),),
                           call=ctx.source(call), cls=got[0], period=ctx.source(got[1])[:40],
                           line=built.lineno)

    def _through_calls(self, stmt: ast.stmt, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        """A step outside every loop of a function run once per batch by its callers
        (NOTE [loops through calls])."""
        for call, k, got in _scheduler_steps(stmt, f, ctx):
            if stepped_per_batch(f, stmt, call.func.value, got[1],  # type: ignore[attr-defined]
                                 optimizer_steps(f, ctx), epoch_counted, ctx):
                yield self._report(call, k.node, got, ctx)


def _scheduler_steps(stmt: ast.stmt, f: LoopFacts, ctx: Context
                     ) -> Iterator[tuple[ast.Call, Kind, tuple[str, ast.expr]]]:
    """(call, scheduler kind, (class, period)) for each ``<scheduler>.step()`` of ``stmt``
    whose scheduler is built with a period counting ``step()`` calls."""
    for call in f.calls_of(stmt):
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr == "step"
                and not call.args and not call.keywords):
            continue
        k = ctx.analysis.kind(func.value, f.scope, call.lineno)
        if k is None or k.what != SCHEDULER or not isinstance(k.node, ast.Call):
            continue
        got = _period(k.node, ctx)
        if got is not None:
            yield call, k, got
