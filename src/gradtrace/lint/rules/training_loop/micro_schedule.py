"""GT534: a scheduler stepped on every micro-batch of a gradient-accumulation loop."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.kinds import SCHEDULER
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.rules.training_loop._base import LoopRule, related_at
from gradtrace.lint.rules.training_loop._loop import LoopFacts
from gradtrace.lint.rules.training_loop.micro_steps import conditional, periodic_steps


class SchedulerSteppedEveryMicroBatch(LoopRule):
    """`scheduler.step()` runs on every pass of a loop whose `optimizer.step()` runs only
    every few passes (gradient accumulation: `if (i + 1) % accum == 0:`).

    Why: a scheduler counts calls of its `step()`. Stepped on every micro-batch while the
    optimizer updates once every `accum` of them, the schedule runs `accum` times too fast:
    warmup ends before the first update, a cosine or step decay meant for the run is spent
    early (and a cosine climbs back up), `OneCycleLR(total_steps=updates)` raises `Tried to
    step ... times` (starVLA#210, checked on torch 2.13). Step the scheduler right after the
    optimizer, under the same `if`.
    Known limits: the scheduler must be known (NOTE [kinds]) and stepped without a metric in
    the loop that holds the periodic step, not under another `if`; a schedule whose length
    counts passes (`len(loader) * epochs`, not divided) is left alone, as are loops where an
    optimizer also steps on every pass.
    """

    code = "GT534"
    name = "scheduler-stepped-every-micro-batch"
    message = ("`{call}` runs on every pass, but `{opt}.step()` (line {step_line}) only every "
               "few passes (`{test}`): the schedule advances once per micro-batch and runs "
               "that many times too fast; step it under the same `if`, after the optimizer")
    triggers = ("step(",)
    function_needs = ("backward", "step")
    examples = [
        Bad("""
            import torch
            sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=n_updates)
            for i, (x, y) in enumerate(loader):
                (criterion(model(x), y) / accum).backward()
                if (i + 1) % accum == 0:
                    opt.step()
                    opt.zero_grad()
                sched.step()
            """, at=(8, 4)),
        Good("""
            import torch
            sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=n_updates)
            for i, (x, y) in enumerate(loader):
                (criterion(model(x), y) / accum).backward()
                if (i + 1) % accum == 0:
                    opt.step()
                    opt.zero_grad()
                    sched.step()
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        done: set[int] = set()
        for s, loop, guard, _mods in periodic_steps(f):
            if any(o is not s and not o.closure and f.loops_of(o.stmt)[-1:] == (loop,)
                   and not f.inside(o.stmt, guard) for o in f.steps):
                continue  # another optimizer steps on every pass
            for stmt in f.within(loop):
                if id(stmt) in done or f.inside(stmt, guard) or f.loops_of(stmt)[-1:] != (loop,) \
                        or conditional(f, stmt, loop):
                    continue
                for call in f.calls_of(stmt):
                    k = self._scheduler(call, s.optimizer, f, ctx)
                    if k is None:
                        continue
                    done.add(id(stmt))
                    yield self.report(call, ctx, related=(
                        related_at(ctx, s.call, "the optimizer steps here, every few passes"),),
                        call=ctx.source(call), opt=s.optimizer, step_line=s.call.lineno,
                        test=" ".join(ctx.source(guard.test).split())[:50])

    @staticmethod
    def _scheduler(call: ast.Call, opt: str, f: LoopFacts, ctx: Context) -> ast.AST | None:
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr == "step"
                and not call.args and not call.keywords):
            return None
        k = ctx.analysis.kind(func.value, f.scope, call.lineno)
        if k is None or k.what != SCHEDULER:
            return None
        node = k.node
        if isinstance(node, ast.Call):
            first = dotted(node.args[0]) if node.args else None
            if first is not None and opt and first.rpartition(".")[2] != opt.rpartition(".")[2]:
                return None  # another optimizer's schedule
            if _counts_passes(node, f):
                return None
        return func.value


def _counts_passes(call: ast.Call, f: LoopFacts) -> bool:
    """An argument of the scheduler's constructor counts loop passes: ``len(...)`` or a
    product of two non-constants (``epochs * len(loader)``), not divided (by the
    accumulation), directly or through a name the function binds once."""
    todo = [*call.args[1:], *(k.value for k in call.keywords)]
    seen: set[str] = set()
    while todo:
        e = todo.pop()
        if any(isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Div, ast.FloorDiv))
               for n in walk(e)):
            continue
        for n in walk(e):
            if isinstance(n, ast.Call) and dotted(n.func) == "len":
                return True
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult) and not (
                    isinstance(n.left, ast.Constant) or isinstance(n.right, ast.Constant)):
                return True
            if isinstance(n, ast.Name) and n.id not in seen:
                seen.add(n.id)
                bound = f.scope.bindings.get(n.id, [])
                if len(bound) == 1 and bound[0].value is not None:
                    todo.append(bound[0].value)
    return False
