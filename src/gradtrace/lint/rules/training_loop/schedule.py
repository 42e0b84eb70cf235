"""GT515: a learning-rate scheduler stepped before the optimizer it drives."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.built_classes import built_class, own_schedule
from gradtrace.lint.analysis.constructed import built_classes, constructor_values
from gradtrace.lint.analysis.kinds import SCHEDULER
from gradtrace.lint.analysis.protocol import first_pass_truth, stepped_through_self
from gradtrace.lint.analysis.vocabulary import is_scheduler_name
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.rules.training_loop._loop import LoopFacts
from gradtrace.lint.rules.training_loop._base import LoopRule, related_at

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import AttrInfo, ClassInfo


def scheduler_optimizer(f: LoopFacts, recv: ast.expr, line: int) -> tuple[bool, str | None]:
    """(whether ``recv`` is a learning-rate scheduler, the optimizer it was built over).

    A scheduler by its constructor (``torch.optim.lr_scheduler.StepLR(opt, ...)``), else by
    the name of the function that built it (``get_linear_schedule_with_warmup(opt, ...)``),
    else, when nothing in the file binds it, by its own name (``self.lr_scheduler``). Never a
    class of the project that sets the rate by its own ``step()`` (NOTE [own schedule]), built
    here or given by every caller of the function."""
    name = dotted(recv)
    if name is None or _own_schedule_given(f, name):
        return False, None
    for scope in (f.scope, f.ctx.scope(f.ctx.tree)):
        b = scope.binding_before(name, line if scope is f.scope else 10 ** 9)
        if b is None:
            continue
        v = b.value
        if isinstance(v, ast.IfExp):  # `StepLR(opt, ...) if args.scheduler else None`
            v = next((a for a in (v.body, v.orelse) if isinstance(a, ast.Call)), v)
        if not isinstance(v, ast.Call):  # `opt, sched = make_optim(model)`: its kind
            k = f.ctx.analysis.kind(recv, scope, line if scope is f.scope else 10 ** 9)
            return k is not None and k.what == SCHEDULER, None
        got = built_class(f.ctx, v)
        if got is not None and own_schedule(*got):
            return False, None
        k = f.ctx.analysis.kind(v, scope, b.line)
        built = (dotted(v.func) or "").rpartition(".")[2]
        if (k is None or k.what != SCHEDULER) and not is_scheduler_name(built):
            return False, None
        opt = v.args[0] if v.args else next(
            (kw.value for kw in v.keywords if kw.arg == "optimizer"), None)
        return True, dotted(opt) if opt is not None else None
    own = f.ctx.analysis.class_of(f.node) if name.startswith("self.") else None
    info = own.attrs.get(name[5:]) if own is not None else None
    if info is not None and isinstance(info.value, ast.Call):  # `self.sched = StepLR(...)`
        k = own.attr_kind(name[5:])  # type: ignore[union-attr]
        if k is not None and k.what == SCHEDULER:
            v = info.value
            opt = v.args[0] if v.args else None
            return True, dotted(opt) if opt is not None else None
    if own is not None and info is not None and _own_schedule_built(f.ctx, own, info):
        return False, None
    return is_scheduler_name(name), None


def _own_schedule_built(ctx: Context, own: ClassInfo, info: AttrInfo) -> bool:
    """Whether ``self.<attr>``, a parameter of ``__init__`` stored as is, is a class of the
    project that sets the rate by its own ``step()`` at every construction site of the class
    (NOTE [construction sites])."""
    v = info.value
    if not isinstance(v, ast.Name) or info.method is not own.methods.get("__init__") or \
            info.later:
        return False
    sites = constructor_values(ctx, own, v.id)
    if not sites:
        return False
    for sctx, val, where in sites:
        got = built_classes(sctx, val, where, val.lineno)
        if not got or not all(own_schedule(*g) for g in got):
            return False
    return True


def _own_schedule_given(f: LoopFacts, name: str) -> bool:
    """Whether parameter ``name`` of the loop's function is, at every call of it in the file,
    a class of the project that sets the rate by its own ``step()``."""
    fn = f.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or \
            name not in {a.arg for a in (*fn.args.posonlyargs, *fn.args.args,
                                         *fn.args.kwonlyargs)}:
        return False
    a = f.ctx.analysis
    given = a.argument_values(fn, name)
    for v, where in given:
        if isinstance(v, ast.Name):
            b = f.ctx.scope(where).binding_before(v.id, v.lineno)
            v = b.value if b is not None else None
        got = built_class(f.ctx, v) if isinstance(v, ast.Call) else None
        if got is None or not own_schedule(*got):
            return False
    return bool(given)


BEFORE = ("runs before `{opt}.step()` ({where}) has ever run: the first value of the "
          "learning-rate schedule is skipped (PyTorch warns 'Detected call of "
          "`lr_scheduler.step()` before `optimizer.step()`')")
INSTEAD = ("runs in place of `{opt}.step()` ({where}), in the other arm of the same `if`, "
           "whose test no pass changes: while the scheduler steps, the optimizer never does "
           "and the weights never move")


class SchedulerStepBeforeOptimizerStep(LoopRule):
    """`scheduler.step()` runs before the first `optimizer.step()` of its optimizer.

    Why: a scheduler's `step()` moves the learning rate to the schedule's next value; called
    at the start of each epoch (the order of PyTorch before 1.1), or before the optimizer in
    each iteration, its first call comes before any `optimizer.step()`, so the first value of
    the schedule is never used (the first epoch trains at the second epoch's rate). PyTorch
    warns "Detected call of `lr_scheduler.step()` before `optimizer.step()`". Step the
    scheduler after the optimizer (at the end of the epoch or iteration). A guard on the
    epoch (`if epoch > cfg.START:`) that the first pass already passes does not delay it
    (NOTE [first pass]). Stepping the scheduler in one arm of an `if` whose other arm steps the
    optimizer (`if scheduler: scheduler.step() else: optimizer.step()`) is worse: the test
    is the same on every pass, so while the scheduler steps the weights never move.
    An epoch function that steps the scheduler on entry, before its batch loop steps the
    optimizer, is the same order (NOTE [stepped on entry]).
    Known limits: the optimizer's steps must be in the same function, or in a function of this
    file called there with the optimizer as an argument (or reading it as a global), or in a
    method called through `self` that steps `self.<optimizer>` (NOTE [stepped through self]); a
    scheduler stepped with an argument (`step(epoch)`, `step(val_loss)`) is not reported;
    a scheduler stepped in an event handler (`@trainer.on(...)`) is not seen.
    """

    code = "GT515"
    gate_statements = True
    name = "scheduler-step-before-optimizer-step"
    message = "`{call}` {what}; step the scheduler after the optimizer"
    triggers = ("sched",)
    function_needs = ("step", "sched")
    examples = [
        Bad("""
            import torch
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.1)
            for epoch in range(epochs):
                scheduler.step()
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
            """, at=(4, 4)),
        Bad("""
            import torch
            def train(model, loader, optimizer):
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()

            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
            for epoch in range(epochs):
                scheduler.step()
                train(model, loader, optimizer)
            """, at=(10, 4)),
        Good("""
            import torch
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.1)
            for epoch in range(epochs):
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
                scheduler.step()
            """),
        Good("""
            import torch
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.1)
            for epoch in range(epochs):
                if epoch > 0:
                    scheduler.step()
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        steps: list[tuple[str, ast.stmt, ast.Call]] | None = None
        for stmt in f.scope.stmts:
            for call in f.calls_of(stmt):
                func = call.func
                if not (isinstance(func, ast.Attribute) and func.attr == "step"
                        and not call.args and not call.keywords
                        and (f.loops_of(stmt) or _opens_function(f, stmt))):
                    continue
                is_sched, opt = scheduler_optimizer(f, func.value, call.lineno)
                if not is_sched:
                    continue
                if steps is None:
                    steps = optimizer_steps(f, ctx)
                mine = [x for x in steps if opt is None or x[0] == opt]
                if opt is None and len({x[0] for x in mine}) != 1:
                    continue
                first = _first_after(f, stmt, mine)
                what = BEFORE
                if first is None:
                    first, what = in_place_of(f, stmt, mine), INSTEAD
                if first is not None:
                    o, _, st_call = first
                    inline = any(s.call is st_call for s in f.steps)
                    where = f"line {st_call.lineno}" if inline else \
                        f"in `{ctx.source(st_call.func)}`, line {st_call.lineno}"
                    yield self.report(call, ctx, related=(
                        related_at(ctx, st_call, f"`{o}` steps here, after the scheduler"),),
                        call=ctx.source(call), what=what.format(opt=o, where=where))


def optimizer_steps(f: LoopFacts, ctx: Context) -> list[tuple[str, ast.stmt, ast.Call]]:
    """(optimizer, statement, call) for every optimizer step of the function: its own
    ``opt.step()`` and the calls of functions of this file that step an optimizer they are
    given (or a global one)."""
    out = [(s.optimizer, s.stmt, s.call) for s in f.steps]
    an = ctx.analysis
    for stmt in f.scope.stmts:
        for call in f.calls_of(stmt):
            fn = an.callee(call, f.node)
            if fn is None or fn is f.node:
                continue
            binds = an.arguments(fn, call)
            for p in an.stepped_params(fn):
                name = dotted(binds[p]) if p in binds else None
                if name:
                    out.append((name, stmt, call))
            out.extend((g, stmt, call) for g in an.stepped_globals(fn))
            out.extend((a, stmt, call) for a in stepped_through_self(fn, ctx))
    return out


def _first_after(f: LoopFacts, stmt: ast.stmt, steps: list[tuple[str, ast.stmt, ast.Call]]
                 ) -> tuple[str, ast.stmt, ast.Call] | None:
    """The optimizer step that runs first after ``stmt`` when every step of that optimizer
    in the function runs after ``stmt`` in the same loop (and the same ``if`` branch, unless
    the first pass of the loop takes that branch: NOTE [first pass])."""
    loops = f.loops_of(stmt)
    if steps and not loops and _opens_function(f, stmt):
        # (NOTE [stepped on entry]) every step of the function runs after it, in a loop
        if all(f.before(stmt, st) and f.loops_of(st) for _, st, _ in steps):
            return min(steps, key=lambda x: (x[2].lineno, x[2].col_offset))
        return None
    if not steps or not loops:
        return None
    loop = loops[-1]
    branch = _branch(f, stmt, loop)
    if branch is not None and first_pass_truth(branch.test, loop, f.ctx) is True:
        branch = None
    for _, st, _ in steps:
        if not (f.inside(st, loop) and f.before(stmt, st)):
            return None
        if branch is not None and not f.inside(st, branch):
            return None
    return min(steps, key=lambda x: (x[2].lineno, x[2].col_offset))


def _opens_function(f: LoopFacts, stmt: ast.stmt) -> bool:
    """``stmt`` is an unconditional statement of a function's own body (not of a loop or an
    ``if``): NRI's ``def train(epoch): ...; scheduler.step(); for batch in loader: ...
    optimizer.step()``, whose every call steps the scheduler before the optimizer.

    # NOTE [stepped on entry]
    An epoch function that steps the scheduler on entry, before its batch loop steps the
    optimizer, does on its first call what an epoch loop stepping the scheduler first does:
    the first value of the schedule is skipped, and PyTorch warns. Said only when every step
    of that optimizer in the function runs after it, inside a loop."""
    return isinstance(f.node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
        stmt is s for s in f.node.body)


def _branch(f: LoopFacts, stmt: ast.stmt, loop: ast.stmt) -> ast.If | None:
    """The innermost ``if`` of ``loop`` that holds ``stmt``."""
    return next((s for s in reversed(f.scope.stmts) if isinstance(s, ast.If)  # type: ignore[misc]
                 and s is not stmt and f.inside(stmt, s) and f.inside(s, loop)), None)


def in_place_of(f: LoopFacts, stmt: ast.stmt, steps: list[tuple[str, ast.stmt, ast.Call]]
                ) -> tuple[str, ast.stmt, ast.Call] | None:
    """The optimizer step in the other arm of the ``if`` whose arm steps the scheduler
    (``if scheduler: scheduler.step() else: optimizer.step()``), when every step of that
    optimizer is there and the test reads nothing the loop changes: every pass takes the same
    arm, so while the scheduler steps the optimizer never does."""
    loops = f.loops_of(stmt)
    if not steps or not loops:
        return None
    branch = _branch(f, stmt, loops[-1])
    if branch is None or not branch.orelse or any(stmt is s or f.inside(stmt, s)
                                                    for s in branch.orelse):
        return None
    for _, st, _ in steps:
        if not any(st is s or f.inside(st, s) for s in branch.orelse):
            return None
    read = {n.id for n in walk(branch.test) if isinstance(n, ast.Name)}
    bound = {n.id for lp in loops for n in walk(lp) if isinstance(n, ast.Name)
             and isinstance(n.ctx, ast.Store)}
    if not read or read & bound or any(isinstance(n, ast.Call) for n in walk(branch.test)):
        return None
    return min(steps, key=lambda x: (x[2].lineno, x[2].col_offset))
