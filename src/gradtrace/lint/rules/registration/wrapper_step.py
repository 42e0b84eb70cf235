"""GT429: an optimizer wrapper whose `step()` forwards to the wrapped optimizer only in an arm
that the settings it is built with rule out."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.built_flags import construction_flags, ruled_out
from gradtrace.lint.analysis.init_arguments import init_arguments
from gradtrace.lint.analysis.kinds import OPTIMIZER
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import of_types, parent_map
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._tensors import is_optimizer_call


class WrapperStepNeverForwards(Rule):
    """An optimizer wrapper built with settings under which its `step()` never reaches the optimizer.

    Why: a class that wraps an optimizer (for gradient accumulation, a gradient scaler, a
    schedule) and forwards `step()` to it only under a condition on its own settings
    (`if self.accum_steps > 1 and self.n % self.accum_steps == 0:`) does nothing when the
    settings it is built with make the condition false: with the default `accum_steps=0`,
    every `optimizer.step()` of the training loop returns without touching the parameters, and
    the model never changes, with no error (TorchEasyRec#226). Write the condition so that no
    accumulation steps every time (`accum_steps <= 1 or ...`).
    Known limits: the wrapper is a class of this file whose `step` (its own or a base's of the
    file) calls `step` of an attribute of `self` (or hands one to another object's `step`), every
    such call inside `if` arms that the constant arguments (or defaults) of one construction
    of it in this file rule out (NOTE [arms a construction rules out]); a file that runs
    `backward()`.
    """

    code = "GT429"
    name = "wrapper-step-never-forwards"
    message = ("the settings `{cls}` is built with at line {line} make this test false: its "
               "`step()` never calls the wrapped optimizer's `step()`, and the parameters never "
               "change")
    triggers = ("step(",)
    examples = [
        Bad("""
            import torch
            class Accumulating:
                def __init__(self, opt, every=0):
                    self.opt = opt
                    self.every = every
                    self.n = 0
                def step(self):
                    self.n += 1
                    if self.every > 0 and self.n % self.every == 0:
                        self.opt.step()
            opt = Accumulating(torch.optim.SGD(model.parameters(), lr=0.1))
            for x, y in loader:
                loss = torch.nn.functional.mse_loss(model(x), y)
                loss.backward()
                opt.step()
            """, at=(9, 11)),
        Good("""
            import torch
            class Accumulating:
                def __init__(self, opt, every=1):
                    self.opt = opt
                    self.every = every
                    self.n = 0
                def step(self):
                    self.n += 1
                    if self.every > 0 and self.n % self.every == 0:
                        self.opt.step()
            opt = Accumulating(torch.optim.SGD(model.parameters(), lr=0.1))
            for x, y in loader:
                loss = torch.nn.functional.mse_loss(model(x), y)
                loss.backward()
                opt.step()
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        if not ctx.mentions(".backward("):
            return
        wrappers = {}
        for name, info in ctx.analysis.classes.items():
            step = info.method("step")
            if step is None or info.is_module or "__init__" not in info.methods:
                continue
            fwd = [c for c in of_types(step, (ast.Call,)) if _forwards(c)]
            if fwd:
                wrappers[name] = (info, step, fwd)
        if not wrappers:
            return
        for call in of_types(node, (ast.Call,)):
            got = wrappers.get(call.func.id) if isinstance(call.func, ast.Name) else None
            if got is None:
                continue
            info, step, fwd = got
            if not _wraps_optimizer(info, call, fwd, ctx):
                continue  # a wrapped scheduler switched off on purpose is not this
            flags = construction_flags(ctx, info, call)
            if not flags or not all(ruled_out(c, step, flags, ctx) for c in fwd):
                continue
            test = _deciding_test(fwd[0], step, flags, ctx)
            if test is None:
                continue
            yield self.report(test, ctx, related=[Related(
                ctx.path, call.lineno, "the wrapper is built here", ctx.column(call))],
                cls=info.name, line=call.lineno)
            return


def _wraps_optimizer(info, call: ast.Call, fwd: list[ast.Call],  # type: ignore[no-untyped-def]
                     ctx: Context) -> bool:
    """``call`` hands the wrapper a ``torch.optim`` optimizer (built there, or a name the kinds
    know as one), and no forwarded ``self.<x>`` is known to hold another argument of it."""
    def optimizer(e: ast.expr | None) -> bool:
        if e is None:
            return False
        if is_optimizer_call(e, ctx):
            return True
        k = ctx.analysis.kind(e, ctx.scope(), call.lineno)
        return k is not None and k.what == OPTIMIZER
    if not any(optimizer(a) for a in (*call.args, *(k.value for k in call.keywords))):
        return False
    given = dict(init_arguments(info, call, None))
    for c in fwd:
        held = [a for a in c.args if (dotted(a) or "").startswith("self.")] or [c.func.value]  # type: ignore[attr-defined]
        attr = info.attrs.get((dotted(held[0]) or "")[5:])
        v = attr.value if attr is not None else None
        if isinstance(v, ast.Name) and v.id in given and not optimizer(given[v.id]):
            return False  # `self.sched = sched`, handed a scheduler
    return True


def _forwards(c: ast.Call) -> bool:
    """``self.<opt>.step(...)`` or ``self.<scaler>.step(self.<opt>)``."""
    f = c.func
    if not (isinstance(f, ast.Attribute) and f.attr == "step"):
        return False
    recv = dotted(f.value) or ""
    return recv.startswith("self.") and (
        recv.count(".") == 1 or any((dotted(a) or "").startswith("self.") for a in c.args))


def _deciding_test(c: ast.Call, step: ast.AST, flags: dict, ctx: Context) -> ast.expr | None:
    """The test of the outermost ``if`` around ``c`` that the flags decide against."""
    parents = parent_map(step)
    child, p, found = c, parents.get(id(c)), None
    while p is not None and p is not step:
        if isinstance(p, ast.If) and child is not p.test and ruled_out(child, step, flags, ctx) \
                and not ruled_out(p, step, flags, ctx):
            found = p.test
        child, p = p, parents.get(id(p))
    return found
