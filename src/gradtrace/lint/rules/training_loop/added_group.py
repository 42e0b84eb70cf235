"""GT533: a parameter group added to an optimizer after a scheduler that cannot follow it."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.training_loop._base import related_at
from gradtrace.lint.rules._owners import owners
from gradtrace.lint.rules.training_loop.plateau import PlateauMaxModeOnLoss

# NOTE [schedulers and added groups]
# What the next `step()` of a scheduler does with a group added by `add_param_group` after the
# scheduler was built (checked on torch 2.13): the schedulers that zip the groups with the
# per-group lists they made when built (`base_lrs`, `lr_lambdas`) raise; OneCycleLR reads the
# `initial_lr` it wrote into each group then; LinearLR scales the new group's current lr by its
# ratio, so a group never scaled down at the start climbs above its own lr. StepLR,
# MultiStepLR, ExponentialLR, PolynomialLR, CosineAnnealingLR and ReduceLROnPlateau scale the
# current lr of every group and follow an added group: not reported.
EFFECT = {
    "CosineAnnealingWarmRestarts": "raises `ValueError: zip() argument 2 is shorter than "
                                   "argument 1`",
    "LambdaLR": "raises `ValueError: zip() argument 2 is shorter than argument 1`",
    "CyclicLR": "raises `ValueError: zip() argument 2 is shorter than argument 1`",
    "MultiplicativeLR": "raises `ValueError: zip() argument 2 is longer than argument 1`",
    "OneCycleLR": "raises `KeyError: 'initial_lr'`",
    "LinearLR": "never warms the new group up: its lr is multiplied past the value it was "
                "added with",
}
# the schedule helpers of transformers return a LambdaLR (all but the plateau one)
HELPERS = ("transformers.",)


def _scheduler(ctx: Context, call: ast.Call) -> str | None:
    """The torch class a call builds (`LambdaLR`), when it is one of EFFECT's."""
    q = ctx.qualified_name(call.func) or ""
    last = q.rpartition(".")[2]
    if q.startswith("torch.optim.lr_scheduler.") and last in EFFECT:
        return last
    if q.startswith(HELPERS) and "schedule" in last and "plateau" not in last.lower():
        return "LambdaLR"
    return None


def _optimizer_arg(call: ast.Call) -> str | None:
    arg = call.args[0] if call.args else next(
        (k.value for k in call.keywords if k.arg == "optimizer"), None)
    return dotted(arg) if arg is not None else None


class ParamGroupAddedAfterScheduler(Rule):
    """`optimizer.add_param_group(...)` runs after a scheduler was built over that optimizer,
    and the scheduler's class cannot take a new group.

    Why: a scheduler reads the optimizer's groups once, when it is built (`base_lrs`, one
    `lr_lambda` per group, OneCycleLR's `initial_lr`). Unfreezing a backbone during fine-tuning
    with `add_param_group` then breaks its next `step()`: LambdaLR (and the transformers
    warm-up schedules, which are LambdaLRs), CosineAnnealingWarmRestarts, CyclicLR and
    MultiplicativeLR raise `ValueError: zip() argument ... is shorter/longer than argument 1`,
    OneCycleLR raises `KeyError: 'initial_lr'`, and LinearLR keeps running but raises the new
    group's lr past the value it was added with (pytorch#79888, transformers#20029). Add every
    group first (a frozen one can be given to the optimizer while its `requires_grad` is off),
    or build the scheduler again after `add_param_group` (NOTE [schedulers and added groups]).
    Known limits: the scheduler and the `add_param_group` call must name the optimizer the same
    way (`opt`, `self.optimizer`) in one function, or in the methods of one class; StepLR,
    ExponentialLR, CosineAnnealingLR and the other schedulers that scale each group's current
    lr follow an added group and are not reported.
    """

    code = "GT533"
    name = "param-group-added-after-scheduler"
    message = ("`{add}` adds a parameter group after `{sched}` was built over `{opt}` (line "
               "{line}): its next `step()` {effect}; give the optimizer every group first, or "
               "build the scheduler again after adding it")
    triggers = ("add_param_group",)
    examples = [
        Bad("""
            import torch
            from torch.optim.lr_scheduler import LambdaLR

            def finetune(model, loader, epochs):
                opt = torch.optim.AdamW(model.head.parameters(), lr=1e-3)
                sched = LambdaLR(opt, lambda e: 0.95 ** e)
                for epoch in range(epochs):
                    if epoch == 2:
                        opt.add_param_group({"params": model.backbone.parameters(), "lr": 1e-4})
                    for x, y in loader:
                        opt.zero_grad()
                        model(x, y).backward()
                        opt.step()
                    sched.step()
            """, at=(9, 12)),
        Good("""
            import torch
            from torch.optim.lr_scheduler import LambdaLR

            def finetune(model, loader, epochs):
                opt = torch.optim.AdamW(model.head.parameters(), lr=1e-3)
                opt.add_param_group({"params": model.backbone.parameters(), "lr": 1e-4})
                sched = LambdaLR(opt, lambda e: 0.95 ** e)
                for epoch in range(epochs):
                    for x, y in loader:
                        opt.zero_grad()
                        model(x, y).backward()
                        opt.step()
                    sched.step()
            """),
        Good("""
            import torch
            from torch.optim.lr_scheduler import StepLR

            def finetune(model, opt, epochs):
                sched = StepLR(opt, step_size=10)
                for epoch in range(epochs):
                    if epoch == 2:
                        opt.add_param_group({"params": model.backbone.parameters()})
                    sched.step()
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        owner = owners(ctx)
        builds: list[tuple[ast.Call, str, str]] = []
        adds: list[tuple[ast.Call, str]] = []
        for n in walk(node):
            if not isinstance(n, ast.Call):
                continue
            if isinstance(n.func, ast.Attribute) and n.func.attr == "add_param_group":
                if (name := dotted(n.func.value)) is not None:
                    adds.append((n, name))
            elif (cls := _scheduler(ctx, n)) is not None and (
                    opt := _optimizer_arg(n)) is not None:
                builds.append((n, cls, opt))
        for add, opt in adds:
            where = owner.get(id(add))
            for build, cls, bopt in builds:
                if bopt != opt or not self._after(ctx, owner, build, add, opt):
                    continue
                if any(o == opt and owner.get(id(b)) is where and b.lineno > add.lineno
                       for b, _c, o in builds):
                    continue  # the scheduler is built again after the group is added
                related = [related_at(ctx, build, "the scheduler is built here")]
                related += self._steps(ctx, owner, build, cls)
                yield self.report(add, ctx, add=ctx.source(add.func), sched=cls, opt=opt,
                                  line=build.lineno, effect=EFFECT[cls], related=related)
                break

    @staticmethod
    def _steps(ctx: Context, owner: dict[int, ast.AST], build: ast.Call, cls: str) -> list:
        """Where the scheduler's ``step()`` raises (the schedulers of EFFECT that raise): the
        runtime's crash on that line is this finding's symptom (NOTE [crash in related])."""
        target = PlateauMaxModeOnLoss._target(build, owner, ctx)
        if target is None or not EFFECT[cls].startswith("raises"):
            return []
        return [related_at(ctx, step, "its step() raises here") for step, _ in
                PlateauMaxModeOnLoss._steps(target, owner.get(id(build)), owner, ctx, False)]

    @staticmethod
    def _after(ctx: Context, owner: dict[int, ast.AST], build: ast.Call, add: ast.Call,
               opt: str) -> bool:
        """Whether ``add`` runs after ``build`` on the same optimizer: later in the same
        function, or (``self.<opt>``) in another method of the same class."""
        fb, fa = owner.get(id(build)), owner.get(id(add))
        if fb is fa:
            return add.lineno > build.lineno
        if not opt.startswith("self.") or not isinstance(fa, (ast.FunctionDef,
                                                              ast.AsyncFunctionDef)):
            return False
        cb, ca = ctx.analysis.class_of(fb), ctx.analysis.class_of(fa)
        return cb is not None and cb is ca and fa.name != "__init__"
