"""Helpers that run one whole update on what they are given: backward of a loss, then a step.

# NOTE [update helpers]
Agents and trainers often wrap the three calls of an update in a helper, ``def _update(self,
loss, opt): opt.zero_grad(); loss.backward(); opt.step()``, and call it once per network.
A call of such a helper is, for the caller, a backward of the argument given for the loss
followed by a step of the argument given for the optimizer. :func:`update_helper` says which
parameters (by position at the call, ``self`` left out for a method called through ``self``)
those are, for a function of the file (``name(...)``) or a method of the enclosing class
(``self.name(...)``); :func:`update_events` lists, for a function, its direct steps and
backwards and those of its helper calls, in source order. One level only.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.steps import calls_in, step_calls
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.names import dotted

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

Fn = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Event:
    """A step (``loss`` None) or a backward (``optimizer`` None), at ``call`` in ``stmt``."""

    call: ast.Call
    stmt: ast.stmt
    line: float                     # order: a helper's backward comes before its step
    optimizer: ast.expr | None = None
    loss: ast.expr | None = None
    via: Fn | None = None           # the update helper the call runs
    retains: bool = False           # a backward given retain_graph/create_graph


def update_helper(ctx: Context, fn: Fn) -> tuple[int, int] | None:
    """(loss position, optimizer position) when ``fn`` backwards a parameter and then steps
    the optimizer given as another parameter (NOTE [update helpers])."""
    def make() -> tuple[int, int] | None:
        names = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
        if names and names[0] == "self":
            names = names[1:]
        sc = step_calls(ctx, fn)
        losses = [b for b in sc.losses() if isinstance(b.loss, ast.Name) and b.loss.id in names]
        steps = [s for s in sc.steps if s.optimizer in names]
        if len(losses) != 1 or len(steps) != 1 or \
                losses[0].call.lineno > steps[0].call.lineno:
            return None
        loss = losses[0].loss
        return names.index(loss.id), names.index(steps[0].optimizer)  # type: ignore[union-attr]
    return ctx.memo("update-helper", fn, make)


def _helpers(ctx: Context, cls: ast.ClassDef | None) -> dict[str, tuple[Fn, tuple[int, int]]]:
    """Update helpers callable by name: ``self.<m>`` of ``cls``, or functions of the module."""
    def make() -> dict[str, tuple[Fn, tuple[int, int]]]:
        out: dict[str, tuple[Fn, tuple[int, int]]] = {}
        body = cls.body if cls is not None else ctx.tree.body
        for m in body:
            if isinstance(m, FUNCTION_TYPES) and "step" in (c := node_code(ctx, m)) and \
                    "backward" in c:
                got = update_helper(ctx, m)
                if got is not None:
                    out[("self." if cls is not None else "") + m.name] = (m, got)
        return out
    return ctx.memo("update-helpers", cls if cls is not None else ctx.tree, make)


def update_events(ctx: Context, fn: Fn, cls: ast.ClassDef | None) -> list[Event]:
    """The steps and backwards ``fn`` runs, its own and through update helpers, in order."""
    sc = step_calls(ctx, fn)
    scope = ctx.scope(fn)
    out = [Event(s.call, s.stmt, s.call.lineno, optimizer=_opt_expr(s.call))
           for s in sc.steps if not s.closure]
    out += [Event(b.call, b.stmt, b.call.lineno, loss=b.loss, retains=b.retains)
            for b in sc.losses()]
    helpers = {**_helpers(ctx, None), **(_helpers(ctx, cls) if cls is not None else {})}
    if helpers:
        for s in scope.stmts:
            for c in calls_in(s):
                got = helpers.get(dotted(c.func) or "")
                if got is None or len(c.args) <= max(got[1]) or got[0] is fn:
                    continue
                loss, opt = c.args[got[1][0]], c.args[got[1][1]]
                out.append(Event(c, s, c.lineno, loss=loss, via=got[0]))
                out.append(Event(c, s, c.lineno + 0.5, optimizer=opt, via=got[0]))
    return sorted(out, key=lambda e: (e.line, e.call.col_offset))


def _opt_expr(call: ast.Call) -> ast.expr | None:
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr == "step" and not call.args:
        return f.value
    return call.args[0] if call.args else None  # `scaler.step(opt)`, `optimizer_step(opt)`


def update_names(ctx: Context, cls: ast.ClassDef | None) -> tuple[str, ...]:
    """The spellings of the update helpers callable from a method of ``cls`` (or a function
    of the module when None): a function holding none of them runs no helper's step."""
    names = [*_helpers(ctx, None)] + ([*_helpers(ctx, cls)] if cls is not None else [])
    return tuple(n.rpartition(".")[2] + "(" for n in names)


def node_code(ctx: Context, node: ast.AST) -> str:
    """The code text of ``node``'s lines (comments and strings out; no re-tokenizing)."""
    if not hasattr(node, "lineno"):
        return ctx.code  # the module
    return "\n".join(ctx.code_lines[node.lineno - 1:node.end_lineno])  # type: ignore[attr-defined]
