"""GT558: a learning-rate scheduler stepped by a handler of the epoch-start event."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.kinds import SCHEDULER
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.rule import Bad, Good, Rule

# NOTE [start events]
# An event-driven trainer (PyTorch-Ignite's `Engine`, and the trainers written after it) fires
# `STARTED` once before the first iteration and `EPOCH_STARTED` before each epoch's first
# iteration: a handler of either runs before the iterations that step the optimizer.
START_EVENTS = frozenset({"EPOCH_STARTED", "STARTED"})


def _event(e: ast.expr) -> str | None:
    """``Events.EPOCH_STARTED`` / ``'EPOCH_STARTED'`` (an event given as such): its name."""
    if isinstance(e, ast.Attribute):
        return e.attr
    if isinstance(e, ast.Constant) and isinstance(e.value, str):
        return e.value
    return None


def _on_start(fn: ast.AST, registered: dict[str, ast.expr]) -> ast.expr | None:
    """The start event ``fn`` is registered for: ``@trainer.on(Events.EPOCH_STARTED)``, or
    ``trainer.add_event_handler(Events.EPOCH_STARTED, fn)`` in the file (``registered``)."""
    for d in getattr(fn, "decorator_list", ()):
        if isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) \
                and d.func.attr == "on" and d.args and _event(d.args[0]) in START_EVENTS:
            return d.args[0]
    return registered.get(getattr(fn, "name", ""))


def _registered(tree: ast.AST) -> dict[str, ast.expr]:
    """Function name -> the start event ``add_event_handler(event, name)`` gives it."""
    out: dict[str, ast.expr] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr == "add_event_handler" and len(n.args) >= 2 \
                and _event(n.args[0]) in START_EVENTS and isinstance(n.args[1], ast.Name):
            out[n.args[1].id] = n.args[0]
    return out


class SchedulerSteppedOnEpochStart(Rule):
    """A learning-rate scheduler is stepped by a handler of the epoch-start event
    (`@trainer.on(Events.EPOCH_STARTED)`, `add_event_handler(Events.STARTED, ...)`).

    Why: the event fires before the epoch's first iteration (NOTE [start events]), so the
    scheduler's first `step()` comes before any `optimizer.step()`: the schedule's first value
    is never used and every epoch trains at the next epoch's rate (PyTorch warns "Detected call
    of `lr_scheduler.step()` before `optimizer.step()`"; a `StepLR(step_size=1, gamma=0.1)`
    starts at a tenth of the configured rate). Step it on `EPOCH_COMPLETED`.
    Known limits: the handler must be a function of the file, registered by a decorator or by
    `add_event_handler` with the event written as `Events.<NAME>` or a string; the scheduler
    is stepped with no argument, and is known to be one (NOTE [construction sites] included);
    `ReduceLROnPlateau` is left to GT531.
    """

    code = "GT558"
    name = "scheduler-stepped-on-epoch-start"
    message = ("`{call}` runs in a handler of `{event}`, before the epoch's first "
               "`optimizer.step()`: the first value of the schedule is skipped and each epoch "
               "runs at the next epoch's rate; step the scheduler on `EPOCH_COMPLETED`")
    triggers = (".on(", "add_event_handler")
    examples = [
        Bad("""
            import torch
            from ignite.engine import Engine, Events
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
            trainer = Engine(update)

            @trainer.on(Events.EPOCH_STARTED)
            def adjust_lr(engine):
                scheduler.step()
            """, at=(8, 4)),
        Good("""
            import torch
            from ignite.engine import Engine, Events
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
            trainer = Engine(update)

            @trainer.on(Events.EPOCH_COMPLETED)
            def adjust_lr(engine):
                scheduler.step()
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        registered = _registered(node) if "add_event_handler" in ctx.code else {}
        for fn in ast.walk(node):
            if not isinstance(fn, FUNCTION_TYPES) or not fn.decorator_list \
                    and fn.name not in registered:
                continue
            event = _on_start(fn, registered)
            if event is None:
                continue
            scope = ctx.scope(fn)
            for n in ast.walk(fn):
                if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                        and n.func.attr == "step" and not n.args and not n.keywords):
                    continue
                k = ctx.analysis.kind(n.func.value, scope, n.lineno)
                if k is None or k.what != SCHEDULER or "Plateau" in (k.cls or ""):
                    continue
                yield self.report(n, ctx, related=(Related(
                    ctx.path, event.lineno, "the handler is registered for this event here",
                    ctx.column(event)),), call=ctx.source(n), event=ctx.source(event))
