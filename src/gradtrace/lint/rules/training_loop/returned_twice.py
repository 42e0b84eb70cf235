"""GT535: a function backpropagates the loss it returns, and its caller (or Lightning)
backpropagates the returned loss again."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.backwarded_returns import backwarded_return
from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.analysis.steps import step_calls
from gradtrace.lint.analysis.update_helpers import node_code
from gradtrace.lint.analysis.vocabulary import STEP_METHOD
from gradtrace.lint.context import Context
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.analysis.lightning import lightning_classes, manual_optimization


class BackwardOfBackwardedReturn(Rule):
    """A function calls `backward()` on a loss and returns it; the caller (or Lightning)
    calls `backward()` on the returned loss again.

    Why: `backward()` frees the graph's saved tensors unless `retain_graph=True`, so the
    second pass over the same loss raises `RuntimeError: Trying to backward through the graph
    a second time` (pytorch-facts.md#backward-twice). Under Lightning's automatic
    optimization (the default) Lightning itself backpropagates the loss `training_step`
    returns, so a `loss.backward()` inside `training_step` is that first pass. Keep one
    backward: drop it from the helper (or from the caller), or return `loss.detach()` for
    logging; in Lightning, return the loss and let Lightning run backward (or set
    `self.automatic_optimization = False` and call `self.manual_backward`).
    Known limits: the helper must return the name it backpropagated (or a dict literal's
    `'loss'` entry), bound in the backward's block; the caller must bind the call's result to
    a name and backpropagate that name in the same function; helpers are matched by name
    (every function of the file with that name must do it).
    """

    code = "GT535"
    name = "backward-of-backwarded-return"
    message = ("`{call}` backpropagates `{loss}` and `{fn}` returns it; {caller} "
               "calls backward on it again ({where}), which raises 'Trying to backward "
               "through the graph a second time'")
    triggers = ("backward",)
    examples = [
        Bad("""
            def train_batch(model, x, y):
                loss = F.mse_loss(model(x), y)
                loss.backward()
                return loss

            for x, y in loader:
                loss = train_batch(model, x, y)
                loss.backward()
                opt.step()
            """, at=(3, 4)),
        Good("""
            def train_batch(model, x, y):
                loss = F.mse_loss(model(x), y)
                loss.backward()
                return loss

            for x, y in loader:
                loss = train_batch(model, x, y)
                print(loss.item())
                opt.step()
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        lightning = {c.name: c for c in lightning_classes(node, ctx).values()
                     if not manual_optimization(c)}
        defs: dict[str, list[ast.AST]] = {}
        for fn, cls in _functions(node):
            defs.setdefault(fn.name, []).append(fn)
        for name, fns in defs.items():
            codes = [node_code(ctx, f) for f in fns]
            if not all("backward" in c and "return" in c for c in codes):
                continue  # (a scope per function of the file would cost more than the rule)
            got = [backwarded_return(ctx, f) for f in fns]  # type: ignore[arg-type]
            if not all(got):
                continue
            for fn, b in zip(fns, got):
                cls = next((c for c in lightning.values() if fn in c.body), None)
                if cls is not None and name == STEP_METHOD:
                    yield self._report(b, fn, ctx, "Lightning (automatic optimization)",
                                       b.call.lineno)
                    continue
                again = _caller_backward(ctx, name)
                if again is not None:
                    yield self._report(b, fn, ctx, "the caller", again.lineno,
                                       again)

    def _report(self, b, fn, ctx: Context, caller: str, line: int,  # type: ignore[no-untyped-def]
                again: ast.AST | None = None) -> Finding:
        rel = () if again is None else (Related(
            ctx.path, again.lineno, "the returned loss is backpropagated again here",
            ctx.column(again)),)
        where = f"line {line}" if again is not None else "after `training_step` returns"
        return self.report(b.call, ctx, related=rel, call=ctx.source(b.call),
                           loss=ctx.source(b.loss), fn=fn.name, caller=caller, where=where)


def _caller_backward(ctx: Context, name: str) -> ast.Call | None:
    """A backward of a name bound to a call of ``name`` (the backward of the caller)."""
    for call, stmt, outer in call_sites(ctx, name):
        if not (isinstance(stmt, ast.Assign) and stmt.value is call and
                len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
            continue
        target = stmt.targets[0].id
        caller = next((o for o in reversed(outer) if isinstance(o, FUNCTION_TYPES)), ctx.tree)
        scope = ctx.scope(caller)
        for b in step_calls(ctx, caller).losses():
            if isinstance(b.loss, ast.Name) and b.loss.id == target and \
                    b.call.lineno > stmt.lineno and \
                    scope.binding_before(target, b.call.lineno) is not None and \
                    scope.binding_before(target, b.call.lineno).stmt is stmt:
                return b.call
    return None


def _functions(tree: ast.Module) -> Iterator[tuple[ast.AST, ast.ClassDef | None]]:
    for s in tree.body:
        if isinstance(s, FUNCTION_TYPES):
            yield s, None
        elif isinstance(s, ast.ClassDef):
            for m in s.body:
                if isinstance(m, FUNCTION_TYPES):
                    yield m, s
