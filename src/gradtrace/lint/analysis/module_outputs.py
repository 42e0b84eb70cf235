"""What a module call gives back: the value every ``return`` of its class's ``forward`` makes.

# NOTE [module outputs]
``probs = model(x)`` is a softmax when the ``forward`` of ``model``'s class (a class of the
file) ends in one on every ``return`` (``return self.softmax(logits)``, ``p = torch.sigmoid(h);
return p.squeeze(-1)``), or when ``model`` is an ``nn.Sequential`` whose last layer is one.
What a rule looks for (a softmax, a sigmoid, a Linear layer) is its own recogniser; this
module only finds, for a call, the expressions that make its result, each with the scope it
is read in, so that ``self.softmax`` inside ``forward`` is read as the ``nn.Softmax`` that
``__init__`` assigned (NOTE [kinds]), not at the caller's place.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Callable

from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.nodes import scope_nodes

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

SEQUENTIAL = frozenset({"torch.nn.Sequential", "torch.nn.modules.container.Sequential"})
Strip = Callable[[ast.AST], ast.AST]


def bound_value(e: ast.AST, scope: Scope, line: int) -> ast.AST:
    """A local name: the value of its last single-target assignment before ``line``, else
    ``e``."""
    if isinstance(e, ast.Name):
        b = scope.binding_before(e.id, line)
        if b is not None and b.value is not None and isinstance(b.stmt, ast.Assign) \
                and len(b.stmt.targets) == 1:
            return b.value
    return e


def returned(fn: ast.AST, ctx: Context, strip: Strip) -> list[ast.AST] | None:
    """What every ``return`` of ``fn`` gives back (under ``strip``'s views, through one
    local name); None when one returns nothing or there is none."""
    scope = ctx.scope(fn)
    rets = [n for n in scope_nodes(fn) if isinstance(n, ast.Return)]
    if not rets or any(r.value is None for r in rets):
        return None
    return [strip(bound_value(strip(r.value), scope, r.lineno))  # type: ignore[arg-type]
            for r in rets]


def module_output(call: ast.AST, scope: Scope, ctx: Context,
                  strip: Strip) -> tuple[Scope | None, list[ast.AST]] | None:
    """When ``call`` runs a module: (the scope of its class's ``forward``, what each of its
    ``return`` gives back), or (None, [the last layer]) for an ``nn.Sequential`` built in
    place from layers; None when not known (NOTE [module outputs])."""
    if not isinstance(call, ast.Call) or not isinstance(call.func, (ast.Name, ast.Attribute)):
        return None
    k = ctx.analysis.kind(call.func, scope, call.lineno)  # `def train(model): model(x)` too
    if k is None or k.what != MODULE or not k.cls:
        return None
    own = ctx.analysis.classes.get(k.cls)
    if own is not None:
        fwd = own.methods.get("forward")
        got = returned(fwd, ctx, strip) if fwd is not None else None
        return (ctx.scope(fwd), got) if got else None
    if k.cls in SEQUENTIAL and isinstance(k.node, ast.Call) and k.node.args \
            and not k.node.keywords and isinstance(k.node.args[-1], ast.Call):
        return None, [k.node.args[-1]]
    return None


def output_made_by(call: ast.AST, scope: Scope, ctx: Context, strip: Strip,
                   made: Callable[[ast.AST, Context, Scope | None], ast.AST | None],
                   ) -> ast.AST | None:
    """The one node ``made`` recognises in what every return of the module ``call`` runs
    gives back (the same node on every return), or None."""
    got = module_output(call, scope, ctx, strip)
    return None if got is None else same_made(got[1], made, ctx, got[0])


def same_made(values: list[ast.AST], made: Callable[[ast.AST, Context, Scope | None],
                                                    ast.AST | None],
              ctx: Context, fscope: Scope | None) -> ast.AST | None:
    """The one node ``made`` recognises in every value (the same node for all), or None."""
    found: ast.AST | None = None
    for v in values:
        m = made(v, ctx, fscope)
        if m is None or (found is not None and found is not m):
            return None
        found = m
    return found
