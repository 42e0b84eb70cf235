"""GT427: a helper freezes the whole model it is given and never unfreezes it, and the
training loop calls it between its steps."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.cut_inputs import bound_param
from gradtrace.lint.analysis.reach import called_function
from gradtrace.lint.analysis.steps import step_calls
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import function_scopes, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.words import holds
from gradtrace.lint.rules.registration._grad_flags import GradFlag, flag_statement, grad_flags
from gradtrace.lint.rules.registration._modules import covers, optimizer_builds

DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class _Freezer:
    """A function of the file that freezes all of its parameter ``param`` for good."""

    fn: ast.FunctionDef | ast.AsyncFunctionDef
    param: str
    flag: GradFlag


class FreezeLeftByHelper(Rule):
    """A helper freezes every parameter of the model it is given, and the training loop calls it.

    Why: `model.requires_grad_(False)` (or a loop setting `p.requires_grad = False` over
    `model.parameters()`) inside an evaluation or logging helper changes the model itself, not a
    copy, and lasts after the helper returns; `model.train()` does not undo it. When the
    training loop calls the helper between its steps, every later forward builds no graph
    through the model: `backward()` raises `element 0 of tensors does not require grad and does
    not have a grad_fn`, or, when something else in the loss still requires grad, the model
    silently stops training. Evaluate under `torch.no_grad()` instead, or unfreeze before
    returning.
    Known limits: the helper is a function of the file, handed the model (a name or a `self`
    attribute) as an argument, freezing all of it unconditionally; the loop around its call
    runs a forward of that model, a `backward()` and the step of an optimizer built in the same
    function (or the script) over the model's parameters, and sets no flag on the model again
    (itself or through another helper of the file).
    """

    code = "GT427"
    name = "freeze-left-by-helper"
    message = ("`{helper}()` freezes every parameter of the model it is given and nothing "
               "unfreezes them: after its call at line {call_line}, the training steps of "
               "`{model}` get no gradient (`backward()` raises `element 0 of tensors does not "
               "require grad` when nothing else in the loss requires grad); evaluate under "
               "`torch.no_grad()` instead")
    triggers = ("requires_grad",)
    examples = [
        Bad("""
            import torch
            def evaluate(model, x):
                model.eval()
                model.requires_grad_(False)
                out = model(x)
                model.train()
                return out
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(10):
                loss = model(x).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
                evaluate(model, x)
            """, at=(4, 4)),
        Good("""
            import torch
            def set_requires_grad(net, flag):
                for p in net.parameters():
                    p.requires_grad = flag
            for epoch in range(10):
                set_requires_grad(D, False)
                loss = D(G(z)).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                set_requires_grad(D, True)
            """),
        Good("""
            import torch
            def evaluate(model, x):
                model.requires_grad_(False)
                out = model(x)
                model.requires_grad_(True)
                return out
            for epoch in range(10):
                loss = model(x).sum()
                loss.backward()
                opt.step()
                evaluate(model, x)
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        freezers = _freezers(ctx)
        if not freezers:
            return
        told: set[int] = set()  # each helper's freeze once, whichever caller shows it
        for fn in function_scopes(node):
            yield from self._callers(fn, freezers, told, ctx)

    def _callers(self, node: ast.AST, freezers: dict[int, _Freezer], told: set[int],
                 ctx: Context) -> Iterator[Finding]:
        scope = ctx.scope(node)
        for s, v in _loop_calls(scope):
            fn = called_function(v, scope, s.lineno)
            fz = freezers.get(id(fn)) if fn is not None and id(fn) not in told else None
            model = _argument_for(v, fz) if fz is not None else None
            if model is None:
                continue
            loops = scope.loops_of(s)
            loop = loops[0]
            if not _trains_in(node, loop, model, ctx) or _flagged_again(scope, loop, v, model,
                                                                       freezers, ctx):
                continue
            told.add(id(fz.fn))  # type: ignore[union-attr]
            flag = flag_statement(fz.flag.stmt)  # type: ignore[union-attr]
            yield self.report(flag, ctx, related=[Related(
                ctx.path, s.lineno, f"`{ctx.source(v).strip()}` runs inside the training loop",
                ctx.column(s))], helper=fz.fn.name, call_line=s.lineno,  # type: ignore[union-attr]
                model=model)
            return


def _loop_calls(scope) -> Iterator[tuple[ast.stmt, ast.Call]]:  # type: ignore[no-untyped-def]
    """(statement, call) for the calls of the statements inside a loop of ``scope``."""
    for s in scope.stmts:
        if scope.loops_of(s):
            for c in scope.own_calls(s) or ():
                yield s, c


def _freezers(ctx: Context) -> dict[int, _Freezer]:
    """The functions of the file that freeze a whole parameter of theirs and never unfreeze
    it (once per file)."""
    def build() -> dict[int, _Freezer]:
        out: dict[int, _Freezer] = {}
        plain = ctx.code.isascii()  # else names may be spelt otherwise (NFKC): all read
        spelt = [no for no, line in enumerate(ctx.code_lines, 1) if "requires_grad" in line]
        for fn in function_scopes(ctx.tree) if spelt or not plain else ():
            if not isinstance(fn, DEFS) or plain and not holds(spelt, fn.lineno,
                                                                fn.end_lineno or 0):
                continue  # no flag spelt in it: no scope built to find none (NOTE [flag lines])
            a = fn.args
            params = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
            flags = grad_flags(ctx.scope(fn))
            for f in flags:
                if f.value or f.conditional or f.root not in params \
                        or ctx.scope(fn).branches.get(id(f.stmt)) \
                        or ctx.scope(fn).loops_of(f.stmt) \
                        or any(g.value for g in flags if covers(g.root, f.root)
                               or covers(f.root, g.root)):
                    continue
                out[id(fn)] = _Freezer(fn, f.root, f)
                break
        return out
    return ctx.memo("gt427-freezers", ctx.tree, build)


# NOTE [flag lines]
# Every flag :func:`._grad_flags.grad_flags` reads is an attribute spelt ``requires_grad`` or
# ``requires_grad_`` in the function's own code (not a string, not a comment), so a function
# whose lines never hold ``requires_grad`` has no flag and is no freezer: its scope is not
# built for this rule (on transformers most functions of the files that wake GT427). Code
# that is not ASCII is read whole: Python normalises identifiers (NFKC).


def _argument_for(call: ast.Call, fz: _Freezer) -> str | None:
    """The caller's spelling of what ``call`` passes for the freezer's parameter."""
    for x in (*call.args, *(k.value for k in call.keywords)):
        if bound_param(fz.fn, call, x) == fz.param:
            return dotted(x)
    return None


def _trains_in(node: ast.AST, loop: ast.stmt, model: str, ctx: Context) -> bool:
    """The loop runs a forward of ``model``, a backward, and a step of an optimizer built (in
    this function or the script) over the model's parameters."""
    calls = step_calls(ctx, node)
    inside = {id(n) for n in walk(loop)}
    if not any(id(b.call) in inside for b in calls.backwards) \
            or not any(id(st.call) in inside for st in calls.steps):
        return False
    if not any(isinstance(n, ast.Call) and dotted(n.func) == model for n in walk(loop)):
        return False
    stepped = {st.optimizer for st in calls.steps if id(st.call) in inside}
    builds = [*optimizer_builds(ctx.scope(node)), *(
        optimizer_builds(ctx.scope(ctx.tree)) if node is not ctx.tree else ())]
    # the model is trained by a stepped optimizer (a frozen teacher is not)
    return any(b.name in stepped and any(covers(model, x) or covers(x, model) for x in b.sources)
               for b in builds)


def _flagged_again(scope, loop: ast.stmt, call: ast.Call, model: str,  # type: ignore[no-untyped-def]
                   freezers: dict[int, _Freezer], ctx: Context) -> bool:
    """Something else in the loop sets a flag on ``model``: its own statements, or another
    function of the file it hands the model to (``set_requires_grad(D, True)``)."""
    inside = {id(n) for n in walk(loop)}
    if any(id(g.stmt) in inside and (covers(g.root, model) or covers(model, g.root))
           for g in grad_flags(scope)):
        return True
    for n in walk(loop):
        if isinstance(n, ast.Call) and n is not call \
                and any(dotted(x) == model for x in (*n.args, *(k.value for k in n.keywords))) \
                and called_function(n, scope, getattr(n, "lineno", 0)) is not called_function(
                    call, scope, getattr(call, "lineno", 0)):
            fn = called_function(n, scope, getattr(n, "lineno", 0))
            if fn is not None and id(fn) not in freezers and grad_flags(ctx.scope(fn)):
                return True
    return False
