"""GT517: a step wrapper that clears gradients only when a flag asks, called without it."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.callees import resolve
from gradtrace.lint.analysis.steps import step_calls
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.rules.training_loop._base import LoopRule, related_at
from gradtrace.lint.rules.training_loop._loop import MANUAL_ZERO_RE, LoopFacts, calls_in, facts

Guard = tuple[str, ast.expr, ast.Call]  # (flag parameter, its default, the zero_grad call)


def _defaults(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.expr]:
    a = fn.args
    pos = [*a.posonlyargs, *a.args]
    out = {p.arg: d for p, d in zip(pos[len(pos) - len(a.defaults):], a.defaults)}
    out.update({p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
    return out


def _falsy(e: ast.expr | None) -> bool:
    return isinstance(e, ast.Constant) and e.value in (False, None, 0)


def _flag_guard(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Guard | None:
    """(flag, default, zero_grad call) when every gradient clear in ``fn`` sits under
    ``if <flag>:`` for a parameter ``flag`` whose default is False/None/0, and some step does
    not: when the flag guards every step too (``if optimizer: optimizer.zero_grad();
    loss.backward(); optimizer.step()``, an epoch function that trains only when given an
    optimizer), a call without it steps nothing."""
    defaults = _defaults(fn)
    guards: list[tuple[str | None, ast.Call]] = []
    flag_of: dict[int, str | None] = {}
    _flags_in(fn.body, None, defaults, guards, flag_of)
    flags = {f for f, _ in guards}
    if len(flags) != 1 or None in flags:
        return None
    flag = flags.pop()
    if all(flag_of.get(id(st.call)) == flag for st in step_calls(ctx, fn).steps):
        return None
    default = defaults[flag]  # type: ignore[index]
    return (flag, default, guards[0][1]) if _falsy(default) else None


def _flags_in(stmts: list[ast.stmt], flag: str | None, defaults: dict[str, ast.expr],
              guards: list[tuple[str | None, ast.Call]], flag_of: dict[int, str | None]) -> None:
    """:func:`_flag_guard`'s walk: the flag parameter each call of ``stmts`` runs under
    (``flag_of``) and each gradient clear with it (``guards``)."""
    for s in stmts:
        if isinstance(s, ast.If):
            t = s.test
            name = t.id if isinstance(t, ast.Name) else None
            _flags_in(s.body, flag or (name if name in defaults else None), defaults, guards,
                      flag_of)
            _flags_in(s.orelse, flag, defaults, guards, flag_of)
            continue
        for c in calls_in(s):
            flag_of[id(c)] = flag
            if isinstance(c.func, ast.Attribute) and c.func.attr == "zero_grad":
                guards.append((flag, c))
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(s, field, None)
            if inner and not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef,
                                            ast.ClassDef)):
                _flags_in(inner, flag, defaults, guards, flag_of)


def _wrappers(ctx: Context) -> dict[int, Guard]:
    """The file's functions that step an optimizer and clear its gradients only on a flag."""
    def make() -> dict[int, Guard]:
        out: dict[int, Guard] = {}
        defs = [*ctx.analysis.functions.values(),
                *(m for c in ctx.analysis.classes.values() for m in c.methods.values())]
        for fn in defs:
            if "zero_grad" not in ctx.code_of(fn) or not step_calls(ctx, fn).steps:
                continue
            g = _flag_guard(ctx, fn)
            if g is not None:
                out[id(fn)] = g
        return out
    return ctx.memo("gt517-wrappers", ctx.tree, make)


class StepWrapperNeverClears(LoopRule):
    """A training loop calls a step wrapper (`self.optimizer_step()`) that clears gradients
    only when a flag asks (`if zero_grad: self.optimizer.zero_grad()`), without the flag.

    Why: the flag defaults to False and the loop never passes it, nor clears gradients any
    other way: `backward()` adds into the gradients of every earlier batch and each step
    applies the growing sum (tenstorrent/tt-blacksmith#711). Pass the flag
    (`optimizer_step(zero_grad=True)`), or clear at the top of each pass.
    Known limits: the wrapper must be a function or method of this file whose every
    `zero_grad()` sits under `if <parameter>:` with a False/None default.
    """

    code = "GT517"
    name = "step-wrapper-never-clears"
    message = ("`{call}` steps the optimizer but clears its gradients only when called with "
               "`{flag}=True` (default `{default}`, line {line}), and this loop neither passes "
               "it nor clears them otherwise: every step applies the sum of all earlier "
               "batches' gradients; pass `{flag}=True`")
    triggers = ("zero_grad",)  # in the wrapper; the loop's function need not hold it
    # every function's own lines say `def`: all are still visited, in walk order, and the
    # engine may skip the statements that hold none (NOTE [quiet subtrees])
    gate_statements = True
    statement_triggers = ("def",)
    function_needs = ()
    examples = [
        Bad("""
            class Trainer:
                def optimizer_step(self, zero_grad=False):
                    self.optimizer.step()
                    if zero_grad:
                        self.optimizer.zero_grad()

                def train(self, batches):
                    for x, y in batches:
                        loss = ((self.model(x) - y) ** 2).mean()
                        loss.backward()
                        self.optimizer_step()
            """, at=(11, 12)),
        Good("""
            class Trainer:
                def optimizer_step(self, zero_grad=False):
                    self.optimizer.step()
                    if zero_grad:
                        self.optimizer.zero_grad()

                def train(self, batches, accum=4):
                    for i, (x, y) in enumerate(batches):
                        loss = ((self.model(x) - y) ** 2).mean() / accum
                        loss.backward()
                        if (i + 1) % accum == 0:
                            self.optimizer_step(zero_grad=True)
            """),
    ]

    def _entry(self, node: ast.AST, ctx: Context) -> Iterator[Finding]:
        if _wrappers(ctx):
            yield from self.check(facts(ctx, node), ctx)

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        wrappers = _wrappers(ctx)
        for s in f.scope.stmts:
            loops = f.loops_of(s)
            if not loops:
                continue
            for call in calls_in(s):
                target = resolve(ctx, f.node, call)
                g = wrappers.get(id(target[0])) if target is not None else None
                if g is None:
                    continue
                fn = target[0]  # type: ignore[index]
                flag, default, zero = g
                given = ctx.analysis.arguments(fn, call).get(flag)
                if given is not None and not _falsy(given):
                    continue
                loop = loops[-1]
                text = f.text(loop).replace(ctx.source(call), "")
                backs = any(b.accumulates and f.inside(b.stmt, loop) for b in f.backwards) \
                    or any(b.accumulates for b in step_calls(ctx, fn).backwards)
                if not backs or MANUAL_ZERO_RE.search(text):
                    continue
                yield self.report(call, ctx, related=(
                    related_at(ctx, zero, "gradients are cleared only under the flag here"),),
                    call=ctx.source(call), flag=flag, default=ctx.source(default),
                    line=zero.lineno)
