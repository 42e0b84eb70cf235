"""Whether a function that builds an optimizer is called on every pass of a caller's loop with
the same parameters (GT435, :class:`wiring.OptimizerRecreatedPerCall`): its arguments and
receiver bound before the loop, no new data handed over per pass, no training loop of its own."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk


def function_defs_all(ctx: Context) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every function and method of the file (nested ones included), in source order."""
    return ctx.memo("gt42-all-defs", ctx.tree, lambda: [
        n for n in walk(ctx.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))])


def _called_in_loop(ctx: Context, fn: ast.FunctionDef, roots: set[str],
                    sources: list[str] | None = None) -> ast.Call | None:
    """A call of ``fn`` inside a loop whose arguments for ``roots`` (and whose receiver, for
    ``self``) are bound before that loop, not inside it, and whose pass does not first
    replace the weights of the optimizer's ``sources`` (NOTE [weights replaced each pass])."""
    an = ctx.analysis
    cls = an.class_of(fn)
    for where in [ctx.tree, *function_defs_all(ctx)]:
        if where is fn:
            continue
        scope = ctx.scope(where)
        for s in scope.stmts:
            loops = scope.loops_of(s)
            if not loops or isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef,
                                           ast.ClassDef)):
                continue
            for n in _own_calls(s):
                target = _resolve(n, fn, cls, scope, s.lineno, where, ctx)
                if target is None:
                    continue
                actuals = an.arguments(fn, n)
                exprs = [actuals.get(r) for r in roots if r != "self"]
                if "self" in roots:
                    exprs.append(target if isinstance(target, ast.AST) else None)
                if all(e is not None and _bound_outside(e, scope, loops[-1]) for e in exprs) \
                        and not (_steps_in_own_loop(ctx, fn) and _new_data_per_pass(n, loops[-1])) \
                        and not _weights_replaced(ctx, s, loops[-1], scope, cls, sources or []):
                    return n
    return None


def _steps_in_own_loop(ctx: Context, fn: ast.FunctionDef) -> bool:
    """``fn`` runs a training loop of its own (a step inside a loop of ``fn``)."""
    scope = ctx.scope(fn)
    return any(scope.loops_of(m.stmt) for m in scope.calls_to("step"))


def _new_data_per_pass(call: ast.Call, loop: ast.stmt) -> bool:
    """The call hands over another element of a collection on each pass: ``datasets[t]`` with
    ``t`` the loop's variable, or the variable of a loop over something other than
    ``range(...)`` (``for task in tasks``). Training in phases on different data (continual
    learning's tasks, curriculum stages), where a fresh optimizer per phase is the protocol,
    not a lost state; the same loader every epoch is still reported."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return False
    targets = {n.id for n in walk(loop.target) if isinstance(n, ast.Name)}
    it = loop.iter
    while isinstance(it, ast.Call) and dotted(it.func) in ("enumerate", "zip", "tqdm", "tqdm.tqdm"):
        it = it.args[0] if it.args else it
    over_range = isinstance(it, ast.Call) and dotted(it.func) == "range"
    for a in (*call.args, *(k.value for k in call.keywords)):
        if isinstance(a, ast.Subscript) and any(
                isinstance(n, ast.Name) and n.id in targets for n in walk(a.slice)):
            return True
        if isinstance(a, ast.Name) and a.id in targets and not over_range:
            return True
    return False


def _own_calls(s: ast.stmt) -> Iterator[ast.Call]:
    if isinstance(s, (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith,
                      ast.Try)):
        return
    for n in walk(s):
        if isinstance(n, ast.Call):
            yield n


def _resolve(call: ast.Call, fn: ast.FunctionDef, cls, scope: Scope, line: int,  # type: ignore[no-untyped-def]
             where: ast.AST, ctx: Context) -> ast.AST | bool | None:
    """For a call of ``fn``: its receiver expression (a method) or True (a function)."""
    f = call.func
    if cls is None:
        if isinstance(f, ast.Name) and f.id == fn.name \
                and ctx.analysis.local_callee(call, scope, line) is fn:
            return True
        return None
    if not (isinstance(f, ast.Attribute) and f.attr == fn.name):
        return None
    recv = f.value
    if isinstance(recv, ast.Name) and recv.id == "self":
        return recv if ctx.analysis.class_of(where) is cls else None
    k = ctx.analysis.kind(recv, scope, line)
    return recv if k is not None and k.cls == cls.name else None


def _bound_outside(e: ast.AST, scope: Scope, loop: ast.stmt) -> bool:
    name = dotted(e)
    if name is None:
        return False
    root = name.partition(".")[0]
    if root == "self":
        return True
    start, end = loop.lineno, loop.end_lineno or loop.lineno
    return not any(start <= b.line <= end for b in scope.bindings.get(root, ()))


# NOTE [weights replaced each pass]
# A federated round: `self.communicate()` copies the clients' average into every entry of
# `self.server.model.state_dict()`, then `self.distill()` builds `Adam(self.server.model...
# .parameters())` and trains. Moments kept from the last round would describe weights that
# no longer exist: a new optimizer per round is the protocol (FedAvg's), not a lost state.
# When, earlier in the same pass of the loop, the optimized module's owner (`self.server`, the
# first two parts of a `self.` source) has its weights written wholesale (`load_state_dict`,
# or `copy_` into its `state_dict()` entries, its `parameters()` or a `.data`), directly or by
# a method of the class the pass calls, the per-call optimizer is taken as intended.


def _weights_replaced(ctx: Context, stmt: ast.stmt, loop: ast.stmt, scope: Scope,
                      cls, sources: list[str]) -> bool:  # type: ignore[no-untyped-def]
    owners = {".".join(x.split(".")[:2]) for x in sources if x.startswith("self.")}
    if not owners:
        return False
    for s in scope.stmts:
        if not loop.lineno < s.lineno < stmt.lineno or loop not in scope.loops_of(s):
            continue
        for n in _own_calls(s):
            f = n.func
            m = cls.methods.get(f.attr) if cls is not None and isinstance(f, ast.Attribute) \
                and isinstance(f.value, ast.Name) and f.value.id == "self" else None
            if _writes_weights(n, owners) or m is not None and any(
                    isinstance(c, ast.Call) and _writes_weights(c, owners) for c in walk(m)):
                return True
    return False


def _writes_weights(c: ast.Call, owners: set[str]) -> bool:
    """``c`` writes the weights of a module under one of ``owners`` wholesale."""
    f = c.func
    if not isinstance(f, ast.Attribute) or f.attr not in ("load_state_dict", "copy_"):
        return False
    chain, e = [], f.value
    while isinstance(e, (ast.Attribute, ast.Subscript, ast.Call)):
        chain.append(e)
        e = e.func if isinstance(e, ast.Call) else e.value
    if not any(dotted(x) in owners for x in chain):
        return False
    return f.attr == "load_state_dict" or any(
        isinstance(x, ast.Attribute) and x.attr in ("state_dict", "parameters", "data")
        for x in chain)
