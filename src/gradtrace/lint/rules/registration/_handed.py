"""NOTE [module handed to a training function]: GT438 one call further.

``model = GCN(...)`` built in a script (or ``main()``), the optimizer built over the other
modules only (``Adam(list(emb.parameters()) + list(predictor.parameters()))``), and the
module handed to a function of the file, ``train(model, predictor, ..., optimizer)``, which
calls it in a loop that runs ``backward()`` and steps the optimizer parameter it was given:
the module gets gradients every step and never changes (OGB's link-prediction examples).

Every function the module is handed to must only call it (or read plain attributes:
``model.train()``); a function that runs no ``backward()`` may also put it in ``eval()`` (an
evaluation). Anything else (the module passed on again, its ``parameters()`` handed to
something, ``requires_grad_``, ``load_state_dict``) is taken as handling it on purpose, as the
one-scope reading does.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Callable

from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.flow import Scope

Fn = ast.FunctionDef | ast.AsyncFunctionDef


def _runs_backward(fn: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == "backward" for n in walk(fn))


def handed_training(scope: Scope, name: str, handoffs: list[ast.Call], opts: list,
                    only_called: Callable, trained_call: Callable
                    ) -> tuple[ast.Call, object, Fn] | None:
    """(call of the module inside the training function, the caller's optimizer it steps, that
    function) when every call in ``handoffs`` hands ``name`` to a function of the file that
    only calls it, and one of them trains it with an optimizer of ``opts`` (built before the
    hand-off, over other modules) given as an argument."""
    an = scope.ctx.analysis
    by_name = {o.name: o for o in opts}
    hit = None
    for call in handoffs:
        st = scope.statement_of(call)
        fn = an.local_callee(call, scope, st.lineno) if st is not None else None
        if fn is None or scope.grad_off_at(call) is not None:
            return None
        binds = an.arguments(fn, call)
        params = [p for p, v in binds.items() if isinstance(v, ast.Name) and v.id == name]
        if len(params) != 1:
            return None
        inner = scope.ctx.scope(fn)
        backward = _runs_backward(fn)
        calls = only_called(inner, params[0], None, allow_eval=not backward)
        if calls is None:
            return None
        if not backward or hit is not None:
            continue
        given = [o for p, v in binds.items() if isinstance(v, ast.Name)
                 and (o := by_name.get(v.id)) is not None and o.stmt.lineno < call.lineno]
        local = [_Given(p, o) for p, v in binds.items() for o in given
                 if isinstance(v, ast.Name) and v.id == o.name]
        found = trained_call(inner, calls, local) if local and calls else None
        if found is None:
            return None
        hit = (found[0], found[1].build, fn)
    return hit


class _Given:
    """A parameter of the training function standing for the caller's optimizer ``build``,
    shaped as the one-scope reading's optimizer (name, statement)."""

    def __init__(self, param: str, build: object) -> None:
        self.name = param
        self.build = build
        self.stmt = ast.Pass(lineno=0, col_offset=0)  # given before the function's loops


def measured(n: ast.AST, name: str) -> list[ast.Call]:
    """The ``name.parameters()`` calls a comprehension only iterates to measure or snapshot
    the weights (``[p.detach().clone() for p in m.parameters()]``, ``sum(p.numel() for p in
    m.parameters())``, ``zip(before, m.parameters())``): its element and conditions change
    nothing (no in-place ``*_()`` call, no ``requires_grad``)."""
    if not isinstance(n, (ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp)):
        return []
    parts = [n.key, n.value] if isinstance(n, ast.DictComp) else [n.elt]
    parts += [c for g in n.generators for c in g.ifs]
    for p in parts:
        for x in walk(p):
            if isinstance(x, ast.Attribute) and (x.attr.startswith("requires_grad") or (
                    x.attr.endswith("_") and not x.attr.startswith("_"))):
                return []
    out = []
    for g in n.generators:
        it = g.iter
        cands = it.args if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) \
            and it.func.id in ("zip", "enumerate") else [it]
        out += [c for c in cands if isinstance(c, ast.Call) and isinstance(
            c.func, ast.Attribute) and c.func.attr in ("parameters", "named_parameters")
            and not c.args and dotted(c.func.value) == name]
    return out
