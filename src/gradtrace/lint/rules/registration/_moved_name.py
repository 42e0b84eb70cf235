"""GT403 through a local name: ``p = nn.Parameter(t)``, then only ``p.to(...)`` is kept.

# NOTE [parameter dropped for its moved copy]
``p.to(device=d, dtype=dt)`` (``.cuda()``, ``.double()``, a view) on a Parameter that really
moves or casts returns a new tensor computed from it: a plain, non-leaf ``Tensor``. When the
function binds ``p = nn.Parameter(t)`` once and reads ``p`` nowhere but as the receiver of that
move, and stores the result on an object (``module._parameters[name] = p.to(...)``,
``self.w = p.to(...)``) or returns it, the Parameter itself is dropped and only the copy lives
on: an optimizer given it raises ``can't optimize a non-leaf Tensor`` (curated-transformers
PR#362: a bfloat16 checkpoint loaded as float32). Silent when ``p`` is read anywhere else (the
Parameter is kept; the move is a computation with it), when the copy goes to a local name or
an operand, and under the same exclusions as the direct form (``asks_what_it_has``: a move to
what the data already has returns the Parameter itself).
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.lint.context import Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.leaf._tensors import MOVE_OR_VIEW, asks_what_it_has, is_parameter_call


def _own_statements(fn: ast.AST) -> Iterator[ast.stmt]:
    """The statements of ``fn``'s body, nested blocks included, not nested functions."""
    todo = list(getattr(fn, "body", ()))
    while todo:
        s = todo.pop(0)
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        yield s
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            todo.extend(getattr(s, field, ()))


def dropped_moves(fn: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Context
                  ) -> Iterator[tuple[ast.Call, str]]:
    """``(move, name)`` for each ``name.to(...)`` of ``fn`` (a move, cast or view) whose
    receiver is a local name bound once to ``nn.Parameter(...)`` and read only there, the
    moved copy being stored on an object or returned
    (NOTE [parameter dropped for its moved copy])."""
    scope = None
    for st in _own_statements(fn):
        if isinstance(st, ast.Assign) and len(st.targets) == 1 \
                and isinstance(st.targets[0], (ast.Attribute, ast.Subscript)):
            move = st.value
        elif isinstance(st, ast.Return):
            move = st.value
        else:
            continue
        if not (isinstance(move, ast.Call) and isinstance(move.func, ast.Attribute)
                and move.func.attr in MOVE_OR_VIEW and isinstance(move.func.value, ast.Name)):
            continue
        recv = move.func.value.id
        scope = scope or ctx.scope(fn)
        binds = scope.bindings.get(recv, ())
        if len(binds) != 1 or binds[0].line >= move.lineno or binds[0].value is None \
                or not isinstance(binds[0].stmt, ast.Assign):
            continue
        made = binds[0].value
        if not (isinstance(made, ast.Call) and is_parameter_call(made, ctx) and made.args) \
                or isinstance(made.args[0], ast.Starred):
            continue
        reads = sum(1 for n in walk(fn) if isinstance(n, ast.Name) and n.id == recv
                    and isinstance(n.ctx, ast.Load))
        if reads == 1 and not asks_what_it_has(move, made.args[0], ctx):
            yield move, recv
