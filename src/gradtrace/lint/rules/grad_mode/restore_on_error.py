"""GT219: grad switched off by a plain call and back on later, but not in a `finally`, while a
caller catches the errors of that code and goes on training."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.nodes import bfs_walk, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.grad_mode.global_state import (
    SETTERS, _flag, _is_false, _sink_after, _sink_in_loop_before)


def _restores(owner: ast.AST, line: int, ctx: Context) -> list[ast.Call]:
    """The calls after ``line`` in ``owner`` that turn grad back on."""
    out = []
    for n in bfs_walk(owner):
        if isinstance(n, ast.Call) and n.lineno > line:
            q = ctx.qualified_name(n.func)
            if q in SETTERS and not _is_false(_flag(n)) or q == "torch.enable_grad":
                out.append(n)
    return out


def _in_finally(fn: ast.AST, call: ast.Call) -> bool:
    return any(isinstance(t, ast.Try) and any(call in walk(s) for s in t.finalbody)
               for t in walk(fn))


def _recovering_try(outer: tuple[ast.AST, ...], line: int) -> ast.Try | None:
    """The innermost ``try`` around ``line`` (in its body) whose handler goes on without
    raising again."""
    for t in reversed(outer):
        if isinstance(t, ast.Try) and t.body and t.body[0].lineno <= line <= (
                t.body[-1].end_lineno or 0) and any(
                not any(isinstance(n, ast.Raise) for n in walk(h)) for h in t.handlers):
            return t
    return None


def _owner(outer: tuple[ast.AST, ...], ctx: Context) -> ast.AST:
    return next((o for o in reversed(outer) if isinstance(o, FUNCTION_TYPES)), ctx.tree)


def _method_sink_after(owner: ast.AST, t: ast.Try, ctx: Context) -> ast.Call | None:
    """A ``backward()`` in a function of the file called by its name after the ``try``
    (``trainer.fit(...)`` run again: the method ``fit`` trains)."""
    after = t.end_lineno or t.lineno
    names = {c.func.attr if isinstance(c.func, ast.Attribute) else getattr(c.func, "id", "")
             for c in walk(owner) if isinstance(c, ast.Call) and c.lineno > after}
    for fn in bfs_walk(ctx.tree):
        if isinstance(fn, FUNCTION_TYPES) and fn.name in names:
            sink = _sink_after(fn, 0, ctx, follow=False)
            if sink is not None:
                return sink
    return None


class GradLeftOffAfterCaughtError(Rule):
    """`torch.set_grad_enabled(False)` is undone later in the same function, but not in a
    `finally`, and a caller catches the errors of that code and trains on.

    Why: called as a statement, `set_grad_enabled(False)` switches grad off for the whole
    thread until something switches it back (pytorch-facts.md#grad-mode-left-off). When the
    code between the two calls raises (a user's `validation_step`, a metric on a bad batch),
    the `set_grad_enabled(True)` after it never runs; a caller that catches the error and goes
    on (a notebook cell run again, a retry loop, a `try` around the evaluation) then trains
    with grad off, and its next `backward()` raises `RuntimeError: element 0 of tensors does
    not require grad and does not have a grad_fn` (pytorch-lightning#2180). Use
    `with torch.no_grad():`, or restore the mode in a `finally`.
    Known limits: the switch and its undo are in one function; the `try` that goes on is
    around a call of that function, or of a function of the file that calls it, and the
    training after it (a `backward()` later in that scope, in a function it calls, or earlier
    in a loop around it) is in the file.
    """

    code = "GT219"
    name = "grad-left-off-after-caught-error"
    gate_statements = True
    message = ("`{call}` is undone at line {undo}, but not in a `finally`: if the code between "
               "raises, grad stays off, and the caller that catches the error (line {caught}) "
               "goes on to `{sink}` (line {line}) without a graph; use `with torch.no_grad():` "
               "or restore the mode in `finally`")
    triggers = ("set_grad_enabled",)
    examples = [
        Bad("""
            import torch

            def evaluate(model, batches):
                torch.set_grad_enabled(False)
                scores = [model(x).sum().item() for x in batches]
                torch.set_grad_enabled(True)
                return scores

            def fit(model, batches, opt):
                for epoch in range(3):
                    for x in batches:
                        opt.zero_grad()
                        model(x).sum().backward()
                        opt.step()
                    try:
                        evaluate(model, batches)
                    except RuntimeError:
                        pass
            """, at=(4, 4)),
        Good("""
            import torch

            def evaluate(model, batches):
                torch.set_grad_enabled(False)
                try:
                    return [model(x).sum().item() for x in batches]
                finally:
                    torch.set_grad_enabled(True)

            def fit(model, batches, opt):
                for epoch in range(3):
                    for x in batches:
                        opt.zero_grad()
                        model(x).sum().backward()
                        opt.step()
                    try:
                        evaluate(model, batches)
                    except RuntimeError:
                        pass
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if not isinstance(ctx.parent, ast.Expr) or ctx.qualified_name(node.func) not in SETTERS:
            return
        fn = ctx.function
        if fn is None or not _is_false(_flag(node)) or ctx.grad_disabled is not None:
            return
        undo = _restores(fn, node.lineno, ctx)
        if not undo or any(_in_finally(fn, u) for u in undo):
            return
        got = self._caught(fn, ctx, 2)
        if got is None:
            return
        t, sink = got
        related = (Related(ctx.path, t.lineno, "the error is caught here and the code goes on",
                           ctx.column(t)),
                   Related(ctx.path, sink.lineno, f"`{ctx.source(sink)}` runs with grad off",
                           ctx.column(sink)))
        yield self.report(node, ctx, related=related, call=ctx.source(node),
                          undo=undo[0].lineno, caught=t.lineno, sink=ctx.source(sink),
                          line=sink.lineno)

    def _caught(self, fn: ast.AST, ctx: Context, depth: int
                ) -> tuple[ast.Try, ast.Call] | None:
        """A ``try`` that goes on after an error of a call of ``fn`` (or of a function that
        calls it), and the ``backward()`` that runs after it."""
        name = getattr(fn, "name", "")
        for call, _, outer in call_sites(ctx, name):
            owner = _owner(outer, ctx)
            if owner is fn:
                continue
            t = _recovering_try(outer, call.lineno)
            if t is not None:
                sink = _sink_after(owner, t.lineno, ctx) or _sink_in_loop_before(
                    owner, call, ctx) or _method_sink_after(owner, t, ctx)
                if sink is not None:
                    return t, sink
            if depth > 1 and isinstance(owner, FUNCTION_TYPES):
                got = self._caught(owner, ctx, depth - 1)
                if got is not None:
                    return got
        return None
