"""GT572: a weight average (EMA) updated on every micro-batch of a gradient-accumulation loop."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.averages import folding_classes
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.rules.training_loop._base import LoopRule, related_at
from gradtrace.lint.rules.training_loop._loop import LoopFacts
from gradtrace.lint.rules.training_loop.micro_steps import conditional, periodic_steps

# library averages: class -> the methods that fold the model's current weights in
LIBRARY = {
    "torch.optim.swa_utils.AveragedModel": frozenset({"update_parameters"}),
    "timm.utils.ModelEma": frozenset({"update"}),
    "timm.utils.ModelEmaV2": frozenset({"update"}),
    "timm.utils.ModelEmaV3": frozenset({"update"}),
    "timm.utils.model_ema.ModelEmaV2": frozenset({"update"}),
    "timm.utils.model_ema.ModelEmaV3": frozenset({"update"}),
    "ema_pytorch.EMA": frozenset({"update"}),
    "torch_ema.ExponentialMovingAverage": frozenset({"update"}),
    "diffusers.training_utils.EMAModel": frozenset({"step"}),
}


class AverageUpdatedEveryMicroBatch(LoopRule):
    """A weight average (EMA, `AveragedModel`) is updated on every pass of a loop whose
    `optimizer.step()` runs only every few passes (gradient accumulation).

    Why: between two steps the weights do not change, but each `ema.update(model)` still
    folds them in with weight `1 - decay`: with `accum` micro-batches per step the average
    moves `accum` times per step and its effective decay is `decay ** accum` (0.999 acts as
    0.996 for 4 micro-batches), so the average follows the weights much more closely than
    configured, and a `num_updates` warmup counts micro-batches (F5-TTS#631). Update the
    average right after the optimizer, under the same `if`.
    Known limits: the average must be an instance of a class of the file that folds tensors
    in (`zip(self.<held>, model.parameters())` written in place: NOTE in
    analysis/averages.py) or of a known library average (`torch.optim.swa_utils.
    AveragedModel`, timm's `ModelEma*`, `ema_pytorch.EMA`, `torch_ema`, diffusers'
    `EMAModel`), updated in the loop that holds the periodic step (NOTE [periodic step]),
    not under another `if`.
    """

    code = "GT572"
    name = "average-updated-every-micro-batch"
    message = ("`{call}` folds the weights into the average on every pass, but `{opt}.step()` "
               "(line {step_line}) changes them only every few passes (`{test}`): the average "
               "moves several times per step and decays faster than configured; update it "
               "under the same `if`, after the optimizer")
    triggers = ("step(",)
    function_needs = ("backward", "step")
    examples = [
        Bad("""
            import torch
            ema = torch.optim.swa_utils.AveragedModel(model)
            for i, (x, y) in enumerate(loader):
                (criterion(model(x), y) / accum).backward()
                if (i + 1) % accum == 0:
                    opt.step()
                    opt.zero_grad()
                ema.update_parameters(model)
            """, at=(8, 4)),
        Good("""
            import torch
            ema = torch.optim.swa_utils.AveragedModel(model)
            for i, (x, y) in enumerate(loader):
                (criterion(model(x), y) / accum).backward()
                if (i + 1) % accum == 0:
                    opt.step()
                    opt.zero_grad()
                    ema.update_parameters(model)
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        done: set[int] = set()
        for s, loop, guard, _mods in periodic_steps(f):
            if any(o is not s and not o.closure and f.loops_of(o.stmt)[-1:] == (loop,)
                   and not f.inside(o.stmt, guard) for o in f.steps):
                continue  # another optimizer steps on every pass
            for stmt in f.within(loop):
                if id(stmt) in done or f.inside(stmt, guard) \
                        or f.loops_of(stmt)[-1:] != (loop,) or conditional(f, stmt, loop):
                    continue
                for call in f.calls_of(stmt):
                    if not self._folds(call, f, ctx):
                        continue
                    done.add(id(stmt))
                    yield self.report(call, ctx, related=(
                        related_at(ctx, s.call, "the optimizer steps here, every few passes"),),
                        call=ctx.source(call)[:60], opt=s.optimizer, step_line=s.call.lineno,
                        test=" ".join(ctx.source(guard.test).split())[:50])

    @staticmethod
    def _folds(call: ast.Call, f: LoopFacts, ctx: Context) -> bool:
        """``call`` is ``<average>.<folding method>(...)``."""
        func = call.func
        if not isinstance(func, ast.Attribute):
            return False
        k = ctx.analysis.kind(func.value, f.scope, call.lineno)
        cls = k.cls if k is not None else None
        if not cls and isinstance(func.value, ast.Name):  # `ema = AveragedModel(model)`
            b = f.scope.binding_before(func.value.id, call.lineno)
            if b is not None and isinstance(b.value, ast.Call):
                cls = ctx.qualified_name(b.value.func)
        if not cls:
            return False
        local = folding_classes(ctx).get(cls)
        methods = local[0] if local is not None else LIBRARY.get(cls, frozenset())
        return func.attr in methods
