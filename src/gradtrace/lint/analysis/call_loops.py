"""The loops a function runs in through the calls that run it.

# NOTE [loops through calls]
``def train_step(self, x, y): ...; self.optimizer.step(); self.scheduler.step()`` holds no
loop, yet runs once per batch: ``train_epoch`` calls ``self.train_step(x, y)`` in ``for x, y
in loader:``, and the script calls ``trainer.train_epoch(loader)`` in ``for epoch in
range(epochs):``. :func:`loop_chains` gives, for a function or method of the file, each chain
of loops around the calls that run it, outermost first, as (loop, function or module holding
it) pairs, up to :data:`MAX_HOPS` calls out. A call runs a method when it is
``self.<name>(...)`` in a method of the same class, or ``<x>.<name>(...)`` on a value the kinds
layer knows to be an instance of the class; a top-level function, when it is ``<name>(...)``
with that name bound to nothing else in the file. A chain ends at a function nothing in the
file calls that way. A call under an ``if`` (or in a ``try``) inside its innermost loop may
skip passes: it starts no chain.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.context import LOOP_TYPES

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

MAX_HOPS = 2
DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
Chain = tuple[tuple[ast.stmt, ast.AST], ...]


def loop_chains(ctx: Context, fn: ast.AST, hops: int = 0) -> list[Chain]:
    """The chains of loops ``fn`` runs in (NOTE [loops through calls]); [] when none is
    known."""
    if hops >= MAX_HOPS or not isinstance(fn, DEFS):
        return []
    cls = ctx.analysis.class_of(fn)
    out: list[Chain] = []
    for call, _stmt, outer in call_sites(ctx, fn.name):
        holder = next((o for o in reversed(outer) if isinstance(o, DEFS)), ctx.tree)
        if not _runs(ctx, call, fn, cls, holder):
            continue
        start = outer.index(holder) + 1 if holder is not ctx.tree else 0
        last = max((i for i, o in enumerate(outer) if isinstance(o, LOOP_TYPES)), default=-1)
        if any(isinstance(o, (ast.If, ast.Try)) for o in outer[max(start, last + 1):]):
            continue  # runs on some passes only
        own = tuple((o, holder) for o in outer[start:] if isinstance(o, LOOP_TYPES))
        ups = loop_chains(ctx, holder, hops + 1) or [()]
        out.extend(up + own for up in ups if up + own)
    return out


def _runs(ctx: Context, call: ast.Call, fn: ast.AST, cls: object, holder: ast.AST) -> bool:
    f = call.func
    if cls is None:
        return isinstance(f, ast.Name) and sum(
            1 for s in ast.walk(ctx.tree) if isinstance(s, DEFS)
            and s.name == f.id) == 1  # type: ignore[attr-defined]
    if not isinstance(f, ast.Attribute):
        return False
    if isinstance(f.value, ast.Name) and f.value.id == "self":
        return ctx.analysis.class_of(holder) is cls
    k = ctx.analysis.kind_in(f.value, holder, call.lineno)
    return k is not None and (k.cls or "").rpartition(".")[2] == getattr(cls, "name", None)
