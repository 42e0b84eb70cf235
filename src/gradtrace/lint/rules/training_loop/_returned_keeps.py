"""GT505 across a call: a training step hands back the loss it backpropagated, and the loop
that calls it sums (or collects) the returned value.

# NOTE [backpropagated loss handed back]
``def training_step(self, model, inputs): loss = ...; loss.backward(); return loss``
(NOTE [backwarded returns]) gives its caller the loss with its graph: ``backward()`` frees the saved
tensors, not the graph's nodes, which stay reachable from the returned tensor. A caller loop
``tr_loss += self.training_step(model, inputs)`` (or ``losses.append(...)``, or ``out = ...``
then ``tr_loss += out``) into an accumulator that outlives the loop chains every step's graph
into one that is never freed: memory grows with every step (transformers' Trainer, fixed by
``return loss.detach()``). The place to cut is the ``return``: whatever each caller does, the
step has no use for the graph any more. The finding lands on the ``return``; the caller's
accumulation is its related place. A caller that takes ``.item()``/``.detach()``/``float()``
of the result, or that backpropagates the accumulated sum (GT535's business), is left alone.

# NOTE [loss terms handed back]
``loss, parts = self.criterion(pred, y); loss.backward(); return parts``, where the
criterion (a function or module of the file) returns ``total, parts`` with ``parts`` a term of
``total`` (``total = box + cls``) or a dict literal holding one (``{"box": box, "cls":
cls}``): the step hands back tensors of the backpropagated graph. A caller loop summing them
(``terms = self.train_batch(x)``; ``for k, v in terms.items(): totals[k] += v * n``, or
``acc += terms`` for one term) into an accumulator that outlives the loop keeps every step's
graph. Reported on the accumulation (the step's logging dict is the caller's to cut: a criterion
whose dict holds ``.item()`` numbers is not a term and stays silent).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from gradtrace.lint.analysis.backwarded_returns import backwarded_return
from gradtrace.lint.analysis.accumulators import _uncut_names
from gradtrace.lint.analysis.returned_terms import terms as summed_names
from gradtrace.lint.analysis.reach import called_function
from gradtrace.lint.analysis.steps import step_calls
from gradtrace.lint.analysis.update_helpers import node_code
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.nodes import of_types, scope_statements

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.rules.training_loop._loop import LoopFacts


def returners(ctx: Context) -> frozenset[str]:
    """Names of the file's functions that return the loss they backpropagated."""
    def make() -> frozenset[str]:
        if not ctx.mentions(".backward(") or not ctx.mentions("return "):
            return frozenset()
        out: set[str] = set()
        for n in of_types(ctx.tree, FUNCTION_TYPES):  # walk's order, from the typed index
            if n.name not in out:
                code = node_code(ctx, n)
                if ".backward(" in code and "return " in code and backwarded_return(ctx, n):
                    out.add(n.name)
        return frozenset(out)
    return ctx.memo("gt505-returners", ctx.tree, make)


def term_returners(ctx: Context) -> frozenset[str]:
    """Names of the file's functions that return a term of the loss they backpropagated
    (NOTE [loss terms handed back])."""
    def make() -> frozenset[str]:
        if not ctx.mentions(".backward(") or not ctx.mentions("return "):
            return frozenset()
        out: set[str] = set()
        for n in of_types(ctx.tree, FUNCTION_TYPES):  # walk's order, from the typed index
            if n.name not in out:
                code = node_code(ctx, n)
                if ".backward(" in code and "return " in code and _returns_term(ctx, n):
                    out.add(n.name)
        return frozenset(out)
    return ctx.memo("gt505-term-returners", ctx.tree, make)


def _returns_term(ctx: Context, fn: ast.AST) -> bool:
    """``fn`` returns (a name) unpacked with a loss it backpropagates from one call of a
    function of the file, whose result at that place is a term of that loss, or a dict literal
    holding one."""
    scope = ctx.scope(fn)
    losses = {b.loss.id: b for b in step_calls(ctx, fn).losses() if isinstance(b.loss, ast.Name)}
    if not losses:
        return False
    for r in ctx.memo("scope-statements", fn, lambda: scope_statements(fn)):
        if not (isinstance(r, ast.Return) and isinstance(r.value, ast.Name)):
            continue
        made = scope.binding_before(r.value.id, r.lineno)
        st = made.stmt if made is not None else None
        if not (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(
                st.targets[0], ast.Tuple) and isinstance(st.value, ast.Call)):
            continue
        names = [e.id if isinstance(e, ast.Name) else None for e in st.targets[0].elts]
        whole = next((i for i, n in enumerate(names) if n in losses and n != r.value.id
                      and losses[n].call.lineno > st.lineno), None)
        callee = called_function(st.value, scope, st.lineno) if whole is not None else None
        if callee is not None and _term_at(ctx, callee, whole, names.index(r.value.id),
                                           len(names)):  # type: ignore[arg-type]
            return True
    return False


def _term_at(ctx: Context, fn: ast.AST, whole: int, part: int, width: int) -> bool:
    """Every ``return`` of ``fn`` is a tuple of ``width`` whose element ``part`` is a term of
    element ``whole``, or a dict literal (or a name bound to one) holding one."""
    scope = ctx.scope(fn)
    rets = [r for r in ctx.memo("scope-statements", fn, lambda: scope_statements(fn))
            if isinstance(r, ast.Return) and r.value is not None]
    for r in rets:
        v = r.value
        if not (isinstance(v, ast.Tuple) and len(v.elts) == width):
            return False
        terms, got = summed_names(scope, v.elts[whole], r.lineno), v.elts[part]
        if isinstance(got, ast.Name):
            if got.id in terms:
                continue
            b = scope.binding_before(got.id, r.lineno)
            got = b.value if b is not None else None  # type: ignore[assignment]
        if not (isinstance(got, ast.Dict) and any(
                isinstance(e, ast.Name) and e.id in terms for e in got.values)):
            return False
    return bool(rets)


def calls_returner(ctx: Context, text: str) -> bool:
    """``text`` (a function's) spells a call of a function of :func:`returners` or
    :func:`term_returners`."""
    names = returners(ctx) | term_returners(ctx)
    return bool(names) and any(f"{n}(" in text for n in names)


def term_kept(f: LoopFacts, s: ast.stmt, value: ast.expr) -> ast.stmt | None:
    """The call of a :func:`term_returners` function whose result ``value`` (accumulated by
    ``s`` in ``loop``) reads uncut: ``v = step(...)``, or ``v`` iterated from
    ``step(...)``'s ``items()``/``values()`` (NOTE [loss terms handed back]); the statement
    of that call is returned (the accumulator must outlive its loop)."""
    names = term_returners(f.ctx)
    if not names:
        return None
    for call in _direct_calls(value):
        fn = called_function(call, f.scope, s.lineno)
        if fn is not None and getattr(fn, "name", None) in names:
            return s
    outer = f.loops_of(s)[0]  # the values of one pass: bound in the loops around `s`
    for name in _uncut_names(value):
        b = f.scope.binding_before(name, s.lineno)
        if b is None or not (b.stmt is outer or f.inside(b.stmt, outer)):
            continue
        src: ast.expr | None = b.value if isinstance(b.stmt, ast.Assign) else None
        st = at = b.stmt
        if isinstance(st, ast.For) and isinstance(it := st.iter, ast.Call) and isinstance(
                it.func, ast.Attribute) and it.func.attr in ("items", "values") \
                and isinstance(it.func.value, ast.Name):
            d = f.scope.binding_before(it.func.value.id, st.lineno)
            src = d.value if d is not None and f.inside(d.stmt, outer) \
                and isinstance(d.stmt, ast.Assign) else None
            at = d.stmt if d is not None else at
        if isinstance(src, ast.Call):
            fn = called_function(src, f.scope, s.lineno)
            if fn is not None and getattr(fn, "name", None) in names:
                return at
    return None


def handed_back(f: LoopFacts, s: ast.stmt, value: ast.expr, loop: ast.stmt
                ) -> tuple[ast.Return, ast.AST] | None:
    """(the ``return`` of the backpropagated loss, the function) when ``value``, accumulated by
    ``s`` in ``loop``, is (uncut) the result of a call of such a function, directly or through
    a name bound to that call in the loop (NOTE [backpropagated loss handed back])."""
    names = returners(f.ctx)
    if not names:
        return None
    calls = _direct_calls(value)
    for name in _uncut_names(value):
        b = f.scope.binding_before(name, s.lineno)
        if b is not None and f.inside(b.stmt, loop) and isinstance(b.stmt, ast.Assign) \
                and len(b.stmt.targets) == 1 and isinstance(b.stmt.targets[0], ast.Name) \
                and isinstance(b.stmt.value, ast.Call):
            calls.append(b.stmt.value)
    for call in calls:
        fn = called_function(call, f.scope, s.lineno)
        if fn is None or getattr(fn, "name", None) not in names:
            continue
        back = backwarded_return(f.ctx, fn)  # type: ignore[arg-type]
        ret = next(_returns_of(fn, back.loss.id), None) if back is not None else None  # type: ignore[union-attr]
        if ret is not None:
            return ret, fn
    return None


def _direct_calls(value: ast.expr) -> list[ast.Call]:
    """``step(...)``, ``step(...) * n``: the calls whose result is added as it is."""
    if isinstance(value, ast.BinOp):
        return [c for c in (value.left, value.right) if isinstance(c, ast.Call)]
    return [value] if isinstance(value, ast.Call) else []


def _returns_of(fn: ast.AST, name: str) -> Iterator[ast.Return]:
    """The ``return`` statements handing back ``name``: itself, or a dict literal's ``'loss'``
    entry (NOTE [backwarded returns])."""
    for r in scope_statements(fn):
        v = r.value if isinstance(r, ast.Return) else None
        if isinstance(v, ast.Name) and v.id == name or isinstance(v, ast.Dict) and any(
                isinstance(k, ast.Constant) and k.value == "loss" and isinstance(e, ast.Name)
                and e.id == name for k, e in zip(v.keys, v.values)):
            yield r  # type: ignore[misc]
