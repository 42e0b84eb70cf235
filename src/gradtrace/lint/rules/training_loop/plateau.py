"""GT527: a `ReduceLROnPlateau` built to maximise its metric, stepped with a loss."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.cuts import is_functional_loss, is_loss_class, is_torch_loss
from gradtrace.lint.analysis.flag_set_beside import guarded_off_by_build_flag
from gradtrace.lint.analysis.steps import step_calls
from gradtrace.lint.analysis.torch_classes import builds_torch_class
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.training_loop._base import related_at
from gradtrace.lint.rules.training_loop._exclusive_settings import (
    FUNCS, _enclosing, _exclusive_settings, _exclusive_through_parameter,
)
from gradtrace.lint.rules.training_loop._factories import bound_results, element_calls, factory_of

# calls that keep the value of a loss: `.item()`, `float(...)`, a mean of collected losses
KEEPS = frozenset({"item", "detach", "cpu", "mean", "sum", "numpy", "tolist", "float",
                   "average", "fmean", "median"})


def _mode(call: ast.Call) -> str | None:
    """The ``mode`` a ``ReduceLROnPlateau(opt, mode, ...)`` call is built with ("min" when not
    given; None when it is not a constant string)."""
    m = next((k.value for k in call.keywords if k.arg == "mode"),
             call.args[1] if len(call.args) > 1 else None)
    if m is None:
        return "min"
    return m.value if isinstance(m, ast.Constant) and isinstance(m.value, str) else None


def _backwarded_callables(ctx: Context) -> frozenset[str]:
    """Dotted names of the callables whose result the file backpropagates (``loss =
    self.criterion(out, y)`` then ``loss.backward()``): they compute losses."""
    def make() -> frozenset[str]:
        out: set[str] = set()
        for fn in [ctx.tree, *(n for n in walk(ctx.tree) if isinstance(n, FUNCS))]:
            scope = ctx.scope(fn)
            for b in step_calls(ctx, fn).losses():
                e: ast.expr | None = b.loss
                if isinstance(e, ast.Name):
                    bind = scope.binding_before(e.id, b.call.lineno + 1)
                    e = bind.value if bind is not None else None
                if isinstance(e, ast.Call) and dotted(e.func):
                    out.add(dotted(e.func))  # type: ignore[arg-type]
        return frozenset(out)
    return ctx.memo("gt527-backwarded", ctx.tree, make)


class _LossValue:
    """Whether an expression holds the value of a loss (NOTE: through names, `.item()`,
    averages and the file's own functions, three calls deep)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.seen: set[int] = set()

    def expr(self, e: ast.AST | None, scope: Scope, line: int, depth: int = 0) -> bool:
        if e is None or depth > 6 or id(e) in self.seen:
            return False
        self.seen.add(id(e))
        if isinstance(e, ast.Name):
            return any(self.expr(b.value, scope, b.line, depth + 1) or self._filled(
                e.id, scope, b.line, depth) for b in scope.bindings_before(e.id, line + 1))
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Div, ast.Add)):
            return self.expr(e.left, scope, line, depth + 1)
        if isinstance(e, ast.Call):
            return self.call(e, scope, line, depth)
        if isinstance(e, (ast.GeneratorExp, ast.ListComp)):  # `sum(loss(b).item() for b in val)`
            return self.expr(e.elt, scope, line, depth + 1)
        return False

    def _filled(self, name: str, scope: Scope, line: int, depth: int) -> bool:
        """``losses = []`` then ``losses.append(loss.item())``."""
        return any(self.expr(m.call.args[0], scope, m.stmt.lineno, depth + 1)
                   for m in scope.calls_to("append") if m.receiver == name and m.call.args)

    def call(self, e: ast.Call, scope: Scope, line: int, depth: int) -> bool:
        ctx, f = self.ctx, e.func
        q = ctx.qualified_name(f) or ""
        last = q.rpartition(".")[2] or (f.attr if isinstance(f, ast.Attribute) else
                                        getattr(f, "id", ""))
        if q.startswith("torch.nn.functional."):
            return is_functional_loss(q)
        if last in KEEPS:
            if isinstance(f, ast.Attribute) and not q:
                return self.expr(f.value, scope, line, depth + 1)
            return bool(e.args) and self.expr(e.args[0], scope, line, depth + 1)
        name = dotted(f)
        if name is not None and name in _backwarded_callables(ctx):
            return True
        k = ctx.analysis.kind(f, scope, line)
        if k is not None and k.is_module and k.cls:
            own = ctx.analysis.classes.get(k.cls)
            if is_torch_loss(k.cls) or (own is not None and is_loss_class(own.node, ctx)):
                return True
        fn = ctx.analysis.local_callee(e, scope, line)
        if fn is None or depth > 3:
            return False
        inner = ctx.scope(fn)
        return any(isinstance(r, ast.Return) and self.expr(r.value, inner, r.lineno, depth + 1)
                   for r in walk(fn) if _enclosing(ctx, ctx.tree).get(id(r)) is fn)


class PlateauMaxModeOnLoss(Rule):
    """`ReduceLROnPlateau(opt, mode="max")` is stepped with a loss.

    Why: `ReduceLROnPlateau` counts the `step(metric)` calls at which the metric did not
    improve, and `mode="max"` means improving is going up. Stepped with a validation loss,
    every decrease of the loss counts as no improvement: after `patience` checks the learning
    rate is cut while the model is still getting better, again and again (selene#115).
    Nothing fails. Build it with `mode="min"` (the default) for a loss, or step it with the
    metric that should grow (accuracy, AUROC).
    Known limits: the value passed to `step()` must be a loss the file computes (a torch loss,
    the callable whose result the file backpropagates, or a function of the file returning
    one) through names, `.item()` and averages; a negated loss is a metric to maximise and
    is not reported.
    """

    code = "GT527"
    name = "plateau-max-mode-on-loss"
    message = ("`{ctor}` is built with mode='max', but `{step}` (line {line}) gives it a loss: "
               "every decrease of the loss counts as no improvement, so the learning rate is "
               "cut while the model improves; use mode='min'")
    triggers = ("ReduceLROnPlateau",)
    examples = [
        Bad("""
            import torch.nn.functional as F
            from torch.optim.lr_scheduler import ReduceLROnPlateau

            def fit(model, opt, train, val, epochs):
                plateau = ReduceLROnPlateau(opt, mode="max", patience=3)
                for _ in range(epochs):
                    for x, y in train:
                        opt.zero_grad()
                        F.cross_entropy(model(x), y).backward()
                        opt.step()
                    val_loss = sum(F.cross_entropy(model(x), y).item() for x, y in val)
                    plateau.step(val_loss / len(val))
            """, at=(5, 14)),
        Good("""
            import torch.nn.functional as F
            from torch.optim.lr_scheduler import ReduceLROnPlateau

            def fit(model, opt, train, val, epochs):
                plateau = ReduceLROnPlateau(opt, mode="max", patience=3)
                for _ in range(epochs):
                    for x, y in train:
                        opt.zero_grad()
                        F.cross_entropy(model(x), y).backward()
                        opt.step()
                    acc = sum((model(x).argmax(1) == y).float().mean().item() for x, y in val)
                    plateau.step(acc / len(val))
            """),
        Good("""
            import torch.nn.functional as F
            from torch.optim.lr_scheduler import ReduceLROnPlateau

            def fit(model, opt, val_x, val_y):
                plateau = ReduceLROnPlateau(opt, "min")
                loss = F.mse_loss(model(val_x), val_y).item()
                plateau.step(loss)
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        owner = _enclosing(ctx, node)
        seen: set[int] = set()
        for n in walk(node):
            if not isinstance(n, ast.Call) or not builds_torch_class(
                    ctx, n, "ReduceLROnPlateau") or _mode(n) != "max" or id(n) in seen:
                continue
            seen.add(id(n))
            target = self._target(n, owner, ctx)
            if target is None:
                continue
            for step, scope in self._steps(target, owner.get(id(n)), owner, ctx, built=n):
                arg = step.args[0] if step.args else next(
                    (k.value for k in step.keywords if k.arg == "metrics"), None)
                if arg is not None and _LossValue(ctx).expr(arg, scope, step.lineno):
                    yield self.report(n, ctx, related=(
                        related_at(ctx, step, "it is stepped with a loss here"),),
                        ctor=ctx.source(n.func), step=ctx.source(step)[:60], line=step.lineno)
                    break

    @staticmethod
    def _target(call: ast.Call, owner: dict[int, ast.AST], ctx: Context) -> str | None:
        """The dotted name the scheduler is bound to (``self.scheduler``, ``plateau``)."""
        fn = owner.get(id(call))
        scope = ctx.scope(fn)
        st = scope.statement_of(call)
        if isinstance(st, ast.Assign) and st.value is call and len(st.targets) == 1:
            return dotted(st.targets[0])
        return None

    @staticmethod
    def _steps(target: str, fn: ast.AST | None, owner: dict[int, ast.AST], ctx: Context,
               given: bool = True, built: ast.Call | None = None
               ) -> Iterator[tuple[ast.Call, Scope]]:
        """``<target>.step(...)`` calls with an argument (without one when not ``given``): in
        the scope that built it, or for ``self.<x>``, in the methods of the same class. With
        ``built``, a step in that scope that another binding of the name reaches steps another
        scheduler (a notebook's ``dummy_scheduler = StepLR(...)`` cell before the plateau's)."""
        cls = ctx.analysis.class_of(fn) if target.startswith("self.") else None
        for n in walk(ctx.tree):
            if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and n.func.attr == "step" and bool(n.args or n.keywords) == given
                    and dotted(n.func.value) == target):
                continue
            where = owner.get(id(n))
            if built is not None and where is fn and cls is None:
                sc = ctx.scope(where)
                b, mine = sc.binding_before(target, n.lineno), sc.statement_of(built)
                if b is not None and b.value is not None and b.value is not built \
                        and mine is not None and not sc.exclusive(b.stmt, mine):
                    continue  # (another arm's scheduler of one `if` may reach it instead)
            if where is fn or (cls is not None and ctx.analysis.class_of(where) is cls):
                yield n, ctx.scope(where)


class PlateauStepWithoutMetric(Rule):
    """`ReduceLROnPlateau.step()` is called without the metric it watches.

    Why: unlike the other schedulers, `ReduceLROnPlateau` decides from a value:
    `step(metrics)` takes the validation loss (or accuracy) and cuts the learning rate when
    it stops improving. Called as `scheduler.step()`, like an epoch scheduler, it raises
    `TypeError: ReduceLROnPlateau.step() missing 1 required positional argument: 'metrics'`
    at the end of the first epoch, after the epoch's training is done (CycleGAN's `plateau`
    policy). Pass the metric: `scheduler.step(val_loss)`.
    Known limits: the scheduler must be built in the file and bound to a name (or a `self`
    attribute) that the `step()` call uses, in the same function or class, or returned by a
    factory function of the file whose result is bound that way or collected in a list that
    a `for` loop steps (NOTE [factory-built value]). A build and a
    `step()` under `if` tests that compare one setting (`args.sched`, `config['sched']`) with
    different constants (`== 'plateau'`, `== 'step'`) never meet in one run and are not paired
    (a constructor's `params.sched` is the other methods' `self.params.sched` when it keeps
    `self.params = params`). A `step()` in the `else` of `if self.use_metric:`, a flag the
    plateau's own branch sets to True, is not reported (NOTE [flag set beside the build]).
    """

    code = "GT531"
    name = "plateau-step-without-metric"
    message = ("`{step}` steps the `ReduceLROnPlateau` built at line {line} without the metric "
               "it watches: it raises TypeError (missing 'metrics') at the first call; pass the "
               "validation loss or accuracy")
    triggers = ("ReduceLROnPlateau",)
    examples = [
        Bad("""
            from torch.optim import lr_scheduler

            class Trainer:
                def __init__(self, opt):
                    self.sched = lr_scheduler.ReduceLROnPlateau(opt, factor=0.2, patience=5)

                def end_epoch(self):
                    self.sched.step()
            """, at=(8, 8)),
        Bad("""
            from torch.optim import lr_scheduler

            def get_scheduler(opt, policy):
                if policy == 'step':
                    return lr_scheduler.StepLR(opt, step_size=30)
                return lr_scheduler.ReduceLROnPlateau(opt, patience=5)

            class Model:
                def setup(self, policy):
                    self.schedulers = [get_scheduler(o, policy) for o in self.optimizers]

                def update_learning_rate(self):
                    for s in self.schedulers:
                        s.step()
            """, at=(14, 12)),
        Good("""
            from torch.optim import lr_scheduler

            class Trainer:
                def __init__(self, opt):
                    self.sched = lr_scheduler.ReduceLROnPlateau(opt, factor=0.2, patience=5)

                def end_epoch(self, val_loss):
                    self.sched.step(val_loss)
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        owner = _enclosing(ctx, node)
        for n in walk(node):
            if not isinstance(n, ast.Call) or not builds_torch_class(ctx, n, "ReduceLROnPlateau"):
                continue
            for step, built in self._bare_steps(n, owner, ctx):
                if _exclusive_settings(ctx, n, step, built=built) \
                        or _exclusive_through_parameter(ctx, n, step, owner) \
                        or guarded_off_by_build_flag(ctx, n, step):
                    continue  # `if cfg.sched == 'plateau': s = Plateau(...)` / `== 'step'`
                yield self.report(step, ctx, step=ctx.source(step)[:60], line=n.lineno,
                                  related=(related_at(ctx, n, "the scheduler is built here"),))

    @staticmethod
    def _bare_steps(n: ast.Call, owner: dict[int, ast.AST], ctx: Context
                    ) -> Iterator[tuple[ast.Call, str]]:
        """(``step()`` call without a metric, the name it steps) for the plateau ``n``: bound
        to a name in the function or class, or returned by a factory whose callers bind it or
        collect it (NOTE [factory-built value])."""
        target = PlateauMaxModeOnLoss._target(n, owner, ctx)
        if target is not None:
            for step, _ in PlateauMaxModeOnLoss._steps(target, owner.get(id(n)), owner, ctx,
                                                       given=False, built=n):
                yield step, target
        fn = factory_of(n, owner)
        if fn is None:
            return
        for bound, many, where in bound_results(fn, ctx, owner):
            if many:
                for step in element_calls(bound, "step", where, ctx, owner):
                    yield step, dotted(step.func.value) or bound  # type: ignore[attr-defined]
            else:
                for step, _ in PlateauMaxModeOnLoss._steps(bound, where, owner, ctx,
                                                           given=False):
                    yield step, bound
