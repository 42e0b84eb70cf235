"""The backward calls of a scope (``loss.backward()``, ``scaler.scale(loss).backward()``,
``accelerator.backward(loss)``, ``self.manual_backward(loss)``) and the loss each runs from."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.flow import Scope


BACKWARD_OWNERS = frozenset({"accelerator", "fabric", "self.accelerator", "self.fabric",
                             "engine", "model_engine", "self.engine", "deepspeed_engine"})


@dataclass(frozen=True)
class Sink:
    """A place where a loss is differentiated: ``loss.backward()`` and its spellings."""

    loss: ast.expr
    call: ast.Call
    stmt: ast.stmt


def backward_sinks(scope: Scope) -> list[Sink]:
    """``L.backward()``, ``scaler.scale(L).backward()``, ``accelerator.backward(L)``,
    ``self.manual_backward(L)``, ``torch.autograd.backward(L)`` in source order."""
    out: list[Sink] = []
    for s in scope.stmts:
        for call in _calls_in(s):
            loss = sink_loss(call)
            if loss is not None:
                out.append(Sink(loss, call, s))
    return out


def sink_loss(call: ast.Call) -> ast.expr | None:
    """The differentiated expression when ``call`` is a backward call, else None."""
    f = call.func
    if not isinstance(f, ast.Attribute):
        return None
    if f.attr == "manual_backward":
        return call.args[0] if call.args else None
    if f.attr != "backward":
        return None
    recv = f.value
    owner = dotted(recv)
    if owner in BACKWARD_OWNERS or owner == "torch.autograd":
        return call.args[0] if call.args else None
    if isinstance(recv, ast.Call) and isinstance(recv.func, ast.Attribute) \
            and recv.func.attr == "scale" and len(recv.args) == 1:
        return recv.args[0]
    return recv


def _calls_in(s: ast.stmt) -> list[ast.Call]:
    out: list[ast.Call] = []
    for field_name, value in ast.iter_fields(s):
        if field_name in ("body", "orelse", "finalbody", "handlers", "cases"):
            continue
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, ast.AST):
                out.extend(n for n in walk(v) if isinstance(n, ast.Call))
    return out
