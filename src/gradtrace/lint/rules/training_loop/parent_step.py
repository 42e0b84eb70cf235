"""GT547: an override of a stepping hook calls the parent's only when an optional object is set."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules._gates import file_says_word
from gradtrace.lint.analysis.lightning import lightning_classes

# Lightning's hook whose default body is `optimizer.step(closure=optimizer_closure)`: an
# override that does not call it (or `super()`'s) leaves the step out
LIGHTNING_STEP_HOOK = "optimizer_step"


def _may_step(ctx: Context) -> bool:
    """Whether the file's code may hold a hook the parent steps in (NOTE [step spelt]).

    # NOTE [step spelt]
    GT547 reports a hook only when :meth:`ParentStepUnderOptionalObject._steps_in_parent`
    says the parent steps in it: the class defines Lightning's ``optimizer_step``, or a base
    class of the same file defines the hook with a call of ``.step(...)`` in it. Either way
    the file's code spells the word ``optimizer_step`` or ``step`` (when the code is ASCII: a
    non-ASCII identifier may normalise to either). A file that spells neither (1,162 of the
    1,203 transformers files where the rule is active) is skipped before any class is read;
    its classes gave no finding before either."""
    return file_says_word(ctx, "step", "optimizer_step")  # found with str.find: the
    # pattern `\b(?:optimizer_)?step\b` was tried at every place of the code (0.6% of a check of transformers)


def _super_call(n: ast.AST, name: str) -> bool:
    """``super().<name>(...)`` (or ``super(Cls, self).<name>(...)``)."""
    return isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
        and n.func.attr == name and isinstance(n.func.value, ast.Call) \
        and isinstance(n.func.value.func, ast.Name) and n.func.value.func.id == "super"


def _steps(n: ast.AST, name: str) -> bool:
    """``n`` calls the parent's hook or steps an optimizer itself (``opt.step(...)``)."""
    return any(_super_call(c, name) or isinstance(c, ast.Call) and isinstance(
        c.func, ast.Attribute) and c.func.attr == "step" for c in walk(n))


def _always(body: list[ast.stmt], name: str) -> bool:
    """Every path through ``body`` steps (see :func:`_steps`)."""
    for s in body:
        if isinstance(s, (*FUNCTION_TYPES, ast.ClassDef)):
            continue
        if isinstance(s, ast.If):
            if _always(s.body, name) and _always(s.orelse, name):
                return True
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            if _always(s.body, name):
                return True
        elif isinstance(s, ast.Try):
            if _always(s.body, name) or _always(s.finalbody, name):
                return True
        elif isinstance(s, (ast.For, ast.AsyncFor, ast.While, ast.Match)):
            continue
        elif _steps(s, name):
            return True
        if isinstance(s, (ast.Return, ast.Raise)):
            return False
    return False


def _optional_attr(test: ast.expr) -> str | None:
    """``self.x is not None`` / ``self.x``: ``x``."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 \
            and isinstance(test.ops[0], ast.IsNot) \
            and isinstance(test.comparators[0], ast.Constant) \
            and test.comparators[0].value is None:
        test = test.left
    d = dotted(test) if isinstance(test, ast.Attribute) else None
    return d[5:] if d and d.startswith("self.") and d.count(".") == 1 else None


def _none_default_param(init: ast.AST | None, attr: str) -> str | None:
    """``__init__`` sets ``self.<attr>`` once, straight from its parameter that defaults to
    None (``scheduler=None``): that parameter's name."""
    if not isinstance(init, FUNCTION_TYPES):
        return None
    a = init.args
    pos = [*a.posonlyargs, *a.args]
    defaults = dict(zip([x.arg for x in pos[len(pos) - len(a.defaults):]], a.defaults))
    defaults.update((x.arg, d) for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None)
    sets = [n for n in walk(init) if isinstance(n, ast.Assign) for t in n.targets
            if dotted(t) == f"self.{attr}"]
    if len(sets) != 1 or not isinstance(sets[0].value, ast.Name):
        return None
    p = sets[0].value.id
    d = defaults.get(p)
    return p if isinstance(d, ast.Constant) and d.value is None else None


class ParentStepUnderOptionalObject(Rule):
    """An override of a stepping hook (Lightning's `optimizer_step`, or a method whose version in
    a base class of the file calls `optimizer.step()`) calls `super().<hook>(...)` only inside
    `if self.x is not None:`, where `self.x` is an optional object (`scheduler=None` in
    `__init__`): built without it, the optimizer never steps.

    Why: the parent's hook is what steps the optimizer (Lightning's default `optimizer_step` is
    `optimizer.step(closure=...)`); an override replaces it, so every path that skips the
    `super()` call skips the update. Put beside the optional work (a per-batch scheduler), the
    call runs only when that object exists; without it Lightning still runs every backward and
    logs the loss, and the weights never move (asteroid's `System.optimizer_step`, fixed in
    asteroid#259). Call `super().<hook>(...)` after the `if`, on every path.
    Known limits: the guard must test `self.x` (`is not None` or its truth) set in `__init__`
    from a parameter defaulting to None; a guard on the batch index (stepping every k
    batches on purpose) is another matter and is left alone.
    """

    code = "GT547"
    needs_step = True  # NOTE [step files]
    name = "parent-step-under-optional-object"
    message = ("`{call}` runs only when `self.{attr}` is set; built with the default "
               "`{param}=None`, `{hook}` never calls it and the optimizer never steps: call it "
               "after the `if`, on every path")
    triggers = ("super(",)
    examples = [
        Bad("""
            import pytorch_lightning as pl

            class System(pl.LightningModule):
                def __init__(self, model, scheduler=None):
                    super().__init__()
                    self.model = model
                    self.scheduler = scheduler

                def optimizer_step(self, *args, **kwargs):
                    if self.scheduler is not None:
                        self.scheduler.step()
                        super().optimizer_step(*args, **kwargs)
            """, at=(12, 12)),
        Good("""
            import pytorch_lightning as pl

            class System(pl.LightningModule):
                def __init__(self, model, scheduler=None):
                    super().__init__()
                    self.model = model
                    self.scheduler = scheduler

                def optimizer_step(self, *args, **kwargs):
                    if self.scheduler is not None:
                        self.scheduler.step()
                    super().optimizer_step(*args, **kwargs)
            """),
        Good("""
            import pytorch_lightning as pl

            class System(pl.LightningModule):
                def __init__(self, model, accumulate=None):
                    super().__init__()
                    self.model = model
                    self.accumulate = accumulate

                def optimizer_step(self, epoch, batch_idx, optimizer, closure):
                    if batch_idx % 2 == 0:
                        super().optimizer_step(epoch, batch_idx, optimizer, closure)
                    else:
                        closure()
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        if not _may_step(ctx):
            return  # NOTE [step spelt]
        info = ctx.analysis.classes.get(node.name)
        if info is None:
            return
        lightning = LIGHTNING_STEP_HOOK in info.methods \
            and node.name in lightning_classes(ctx.tree, ctx)  # type: ignore[arg-type]
        init = info.method("__init__")
        for name, m in info.methods.items():
            if not self._steps_in_parent(info, name, lightning):
                continue
            if _always(m.body, name):
                continue
            for s in walk(m):
                if not isinstance(s, ast.If) or s.orelse:
                    continue
                call = next((c for st in s.body for c in walk(st) if _super_call(c, name)), None)
                attr = _optional_attr(s.test)
                if call is None or attr is None:
                    continue
                param = _none_default_param(init, attr)
                if param is None:
                    continue
                stmt = next((st for st in walk(s) if isinstance(st, ast.stmt)
                             and st is not s and call in walk(st)
                             and not isinstance(st, (ast.If, ast.For, ast.While, ast.With))), s)
                yield self.report(stmt, ctx, related=(Related(
                    ctx.path, s.lineno, f"the guard on `self.{attr}`", ctx.column(s)),),
                    call=ctx.source(call)[:60], attr=attr, param=param, hook=name)
                break

    @staticmethod
    def _steps_in_parent(info, name: str, lightning: bool) -> bool:  # type: ignore[no-untyped-def]
        """The hook ``name`` is one the parent steps in: Lightning's ``optimizer_step``, or a
        base class of the file whose ``name`` method steps an optimizer."""
        if lightning and name == LIGHTNING_STEP_HOOK:
            return True
        for base in list(info.lineage())[1:]:
            m = base.methods.get(name)
            if m is not None:
                return any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                           and c.func.attr == "step" for c in walk(m))
        return False
