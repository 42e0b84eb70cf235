"""GT438 one call further: a module handed to a function of the project that trains it.

# NOTE [module handed to a training function]
``model = GCN(...)`` built in a script (or ``main()``), the optimizer built over the other
modules only (``Adam(list(emb.parameters()) + list(predictor.parameters()))``), and the
module handed to a function of the file or one imported from another file of the project
(NOTE [project index]), ``train(model, predictor, ..., optimizer)``, which
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

from gradtrace.lint.analysis.owners import home
from gradtrace.lint.analysis.project import foreign_callee
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
                    ) -> tuple[list[ast.Call], tuple | None] | None:
    """(the hand-offs that run the module with grad on, (call of the module inside the
    training function, the caller's optimizer it steps, that function) or None), or None when
    a function it is handed to does anything else with it. Every call in ``handoffs`` hands
    ``name`` to a function of the file; one that runs ``backward()`` must train it with an
    optimizer of ``opts`` (built before the hand-off, over other modules) given as an
    argument; one that does not is a run of the module when it calls it with grad on (a
    ``train_step(model, x, y)`` inside the caller's own backward-and-step loop), followed two
    calls down."""
    return _follow(scope, name, handoffs, [_Given(o.name, o) for o in opts], only_called,
                   trained_call, 0)


def _follow(scope: Scope, name: str, handoffs: list[ast.Call], opts: list, only_called:
            Callable, trained_call: Callable, depth: int) -> tuple[list, tuple | None] | None:
    an = scope.ctx.analysis
    runs: list[ast.Call] = []
    hit = None
    for call in handoffs:
        st = scope.statement_of(call)
        fn = an.local_callee(call, scope, st.lineno) if st is not None else None
        if fn is None and st is not None and isinstance(call.func, ast.Name) \
                and call.func.id not in an.functions:
            fn = foreign_callee(scope.ctx, call, scope, st.lineno)  # NOTE [project index]
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn is scope.node \
                or scope.grad_off_at(call) is not None:
            return None
        binds = an.arguments(fn, call)
        params = [p for p, v in binds.items() if isinstance(v, ast.Name) and v.id == name]
        if len(params) != 1:
            return None
        inner = home(scope.ctx, fn).scope(fn)
        backward = _runs_backward(fn)
        deeper: list[ast.Call] | None = [] if depth < 1 else None
        calls = only_called(inner, params[0], None, deeper, allow_eval=not backward)
        if calls is None:
            return None
        given = [_Given(p, o.build) for p, v in binds.items() for o in opts
                 if isinstance(v, ast.Name) and v.id == o.name
                 and o.build.stmt.lineno < call.lineno]
        if deeper:
            sub = _follow(inner, params[0], deeper, given, only_called, trained_call, depth + 1)
            if sub is None:
                return None
            calls = [*calls, *sub[0]]
            hit = hit or sub[1]
        if not backward:
            if any(inner.grad_off_at(c) is None for c in calls) and not _grad_off_def(fn):
                runs.append(call)
            continue
        if hit is not None or not calls:
            continue
        found = trained_call(inner, calls, given) if given else None
        if found is None:
            return None
        hit = (found[0], found[1].build, fn)
    return runs, hit


def _grad_off_def(fn: Fn) -> bool:
    """``@torch.no_grad()`` / ``@torch.inference_mode()`` on the function."""
    return any((dotted(d.func if isinstance(d, ast.Call) else d) or "").rpartition(".")[2]
               in ("no_grad", "inference_mode") for d in fn.decorator_list)


class _Given:
    """An optimizer as a function of the chain sees it: ``name`` the caller's name or the
    parameter standing for it, ``build`` the caller's optimizer build; shaped as the
    one-scope reading's optimizer (name, statement)."""

    def __init__(self, name: str, build: object) -> None:
        self.name = name
        self.build = build
        self.stmt = ast.Pass(lineno=0, col_offset=0)  # given before the function's loops


def measured(n: ast.AST, name: str) -> list[ast.Call]:
    """The ``name.parameters()`` calls a comprehension only iterates to measure or snapshot
    the weights (``[p.detach().clone() for p in m.parameters()]``, ``sum(p.numel() for p in
    m.parameters())``, ``zip(before, m.parameters())``, ``len(list(m.parameters()))``): its
    element and conditions change nothing (no in-place ``*_()`` call, no ``requires_grad``)."""
    if isinstance(n, ast.Call) and dotted(n.func) == "len" and len(n.args) == 1:  # a count
        a = n.args[0]
        a = a.args[0] if isinstance(a, ast.Call) and dotted(a.func) == "list" and a.args else a
        return [a] if isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute) \
            and a.func.attr == "parameters" and dotted(a.func.value) == name else []
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
