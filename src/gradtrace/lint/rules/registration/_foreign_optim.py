"""Optimizers built and stepped by functions of another file of the project (GT404).

# NOTE [foreign optimizer builders]
``optimizer = make_optimizer(model, lr)`` with ``def make_optimizer(model, lr): return
torch.optim.AdamW(model.parameters(), lr=lr)`` in ``optim.py``, and ``run_epoch(model,
optimizer, data)`` whose body (in ``engine.py``) calls ``optimizer.step()``: the script's
optimizer holds ``model``'s parameters and is stepped there, as if both were written inline.
A builder counts when every ``return`` of it is a ``torch.optim`` construction (or a name
bound to one in its body) over the ``.parameters()`` of its own parameters; those are
mapped to the call's arguments (``model``). A stepper counts when the other file's own facts
(``stepped_params``) say it steps the parameter the optimizer is handed for. Anything else
(a method, a starred argument, a name the project index cannot resolve): no fact. Read only
in a scope of a file that mentions ``optim`` (the parse of the other file is paid there).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.owners import home
from gradtrace.lint.analysis.project_files import import_holds
from gradtrace.lint.analysis.returned_terms import returns
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.leaf._tensors import is_optimizer_call

if TYPE_CHECKING:
    from gradtrace.lint.flow import Scope

Def = ast.FunctionDef | ast.AsyncFunctionDef


def _foreign(scope: Scope, call: ast.Call, line: int) -> Def | None:
    from gradtrace.lint.analysis.project import foreign_callee

    if not scope.ctx.mentions("optim") or not isinstance(call.func, (ast.Name, ast.Attribute)):
        return None
    fn = foreign_callee(scope.ctx, call, scope, line)
    return fn if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def foreign_optimizer_over(scope: Scope, call: ast.Call, line: int) -> frozenset[str] | None:
    """The dotted arguments of ``call`` whose parameters the optimizer it returns holds
    (NOTE [foreign optimizer builders]); None: not such a builder."""
    if any(isinstance(a, ast.Starred) for a in call.args) or not any(
            isinstance(a, (ast.Name, ast.Attribute)) for a in call.args):
        return None
    if isinstance(call.func, ast.Name) and import_holds(
            scope.ctx, call.func.id, ("parameters",)) is False:
        return None  # a builder reads `.parameters()`: its text says so before any parse
    fn = _foreign(scope, call, line)
    if fn is None:
        return None
    octx = home(scope.ctx, fn)
    rets = [r.value for r in returns(fn.body) if r.value is not None]
    if not rets:
        return None
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    owners: set[str] = set()
    for v in rets:
        if isinstance(v, ast.Name):  # `opt = torch.optim.X(...); return opt`
            b = octx.scope(fn).binding_before(v.id, v.lineno)
            v = b.value if b is not None else None
        if not isinstance(v, ast.Call) or not is_optimizer_call(v, octx):
            return None
        got = {dotted(n.func.value) for n in walk(v) if isinstance(n, ast.Call)
               and isinstance(n.func, ast.Attribute)
               and n.func.attr in ("parameters", "named_parameters")}
        if not got or any(g is None or g.partition(".")[0] not in params for g in got):
            return None
        owners |= {g for g in got if g}
    args = octx.analysis.arguments(fn, call)
    mapped: set[str] = set()
    for o in owners:
        root, _, rest = o.partition(".")
        a = dotted(args[root]) if root in args else None
        if a is None:
            return None
        mapped.add(a + ("." + rest if rest else ""))
    return frozenset(mapped)


def foreign_steppers(scope: Scope, opt: str) -> list[int]:
    """Lines of calls handing ``opt`` to a function of another file that steps it."""
    out: list[int] = []
    if not scope.ctx.mentions(opt):
        return out
    for n in walk(scope.node):
        if not isinstance(n, ast.Call) or not any(
                dotted(a) == opt for a in (*n.args, *(k.value for k in n.keywords))):
            continue
        st = scope.statement_of(n)
        fn = _foreign(scope, n, st.lineno) if st is not None else None
        if fn is None:
            continue
        octx = home(scope.ctx, fn)
        stepped = octx.analysis.stepped_params(fn)
        if any(dotted(v) == opt and p in stepped
               for p, v in octx.analysis.arguments(fn, n).items()):
            out.append(st.lineno)  # type: ignore[union-attr]
    return out
