"""Functions of the file whose every result is computed with grad disabled: two readings.

:func:`grad_off_cut` (GT1, NOTE [grad-off returns]) reads each ``return`` by its shape and
names one line, the ``with`` or decorator that cut it; :func:`returns_off` (GT2, GT5,
NOTE [no-grad helpers]) traces each returned value through its bindings with the GT2 tracer.
Why two: GT1 reports a cut at the region's line, so it needs one region for every return and
takes a ``return res`` of a list, a dict or a tuple of names built there; the traced reading
follows ``correct += (...).item()`` across the region and a value built in two regions, but
knows nothing of a container filled later (``res = []``). Measured on examples/,
tests/realworld/cases, tests/lint and u13-u15 (/tmp-only script, docs/triage/tracer3.md): of
124 functions either reading accepts, both name the same region for 67, only GT1's accepts
45, only the traced one 12; one reading for both would move findings in both families.

# NOTE [grad-off returns]
``def refine(self, enc): with torch.no_grad(): return self.decoder(enc)`` gives back a tensor
with no history whoever calls it: grad mode is global state, and an op run under ``no_grad``
(or ``inference_mode``, or in a function decorated with either) records nothing. That is a
cut (kind ``grad_off``) at the ``with`` (or the decorator) for every caller, reached through
the call as the other helper cuts are (NOTE [helper cuts]). A ``return`` counts when its value
is an operation run inside the grad-off region, or a name bound there to one; returning a
name bound before the region, or a bare attribute, hands out the value unchanged, graph and
all, and does not count. Every ``return`` must count, and a function that returns a Python
number or NumPy value, or that runs ``backward()`` itself, is left out by the helper-cut
rules around it.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.cuts import Cut
from gradtrace.lint.analysis.grad_sources import local_sources
from gradtrace.lint.analysis.reach import called_function, disables_grad
from gradtrace.lint.analysis.undistributed_arms import without_process_group
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

GRAD_OFF = "grad_off"
ALIASES = (ast.Name, ast.Attribute, ast.Constant)


def _switch(off: ast.AST, ctx: Context) -> ast.expr | None:
    """The expression that turns grad off at ``off`` (a ``with`` item or a decorator)."""
    if isinstance(off, FUNCTION_TYPES):
        items = list(off.decorator_list)
    elif isinstance(off, (ast.With, ast.AsyncWith)):
        items = [i.context_expr for i in off.items]
    elif isinstance(off, ast.expr):  # a decorator, as the scope records it
        items = [off]
    else:
        return None
    return next((e for e in items if disables_grad(e, ctx)), None)


def _made_off(value: ast.expr, at: ast.stmt, scope: Scope, depth: int = 0
              ) -> ast.AST | None:
    """The grad-off region (with or def) that made ``value``, returned at ``at``."""
    if depth > 4:
        return None
    if isinstance(value, ast.Tuple) and value.elts:
        offs = [_made_off(e, at, scope, depth + 1) for e in value.elts]
        return offs[0] if all(o is not None and o is offs[0] for o in offs) else None
    if isinstance(value, ast.Name):
        b = scope.binding_before(value.id, at.lineno)
        if b is None or not b.no_grad or b.value is None or isinstance(b.stmt, ast.AugAssign):
            return None
        if isinstance(b.value, ast.Name):
            return _made_off(b.value, b.stmt, scope, depth + 1)
        if isinstance(b.value, ALIASES) or not isinstance(b.stmt, ast.Assign):
            return None
        return scope.grad_off_at(b.stmt)
    if isinstance(value, ALIASES) or isinstance(value, (ast.Lambda, ast.Dict, ast.List)):
        return None
    return scope.grad_off_at(at)


def grad_off_cut(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Cut | None:
    """The cut ``fn`` makes on everything it returns by computing it with grad disabled
    (NOTE [grad-off returns]), or None."""
    scope = ctx.scope(fn)
    returns = [s for s in scope.stmts if isinstance(s, ast.Return)]
    if not returns or any(r.value is None for r in returns):
        return None
    first: Cut | None = None
    for r in returns:
        off = _made_off(r.value, r, scope)  # type: ignore[arg-type]
        switch = _switch(off, ctx) if off is not None else None
        if switch is None:
            return None
        if first is None:
            first = Cut(GRAD_OFF, switch, r.value)  # type: ignore[arg-type]
        elif first.node is not switch:
            return None  # several regions: no one line to name
    return first


def grad_off_element(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef, j: int,
                     arity: int) -> Cut | None:
    """The cut ``fn`` makes on element ``j`` of every tuple of ``arity`` values it returns by
    computing that element with grad disabled, or None: ``seq, scores = model.generate(x)``
    where ``generate`` returns ``input_ids, scores`` (NOTE [unpacked grad-off element])."""
    return ctx.memo(f"grad-off-element:{j}:{arity}", fn, lambda: _element_cut(ctx, fn, j, arity))


def _element_cut(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef, j: int,
                 arity: int) -> Cut | None:
    """# NOTE [unpacked grad-off element]
    A function that hands back a tuple (``return input_ids, scores``) and whose caller unpacks
    it (``seq, scores = model.generate(x)``) gives each caller's name one element: the element
    at that place is cut when every ``return`` gives a tuple of as many values whose element
    there is made in one grad-off region (the reading of NOTE [grad-off returns], element by
    element). The other elements do not matter: a tensor handed back as it came (the prompt)
    keeps its history, but the one made under ``no_grad`` has none whatever the others are."""
    scope = ctx.scope(fn)
    returns = [s for s in scope.stmts if isinstance(s, ast.Return)]
    first: Cut | None = None
    for r in returns:
        v = r.value
        if not isinstance(v, ast.Tuple) or len(v.elts) != arity \
                or any(isinstance(e, ast.Starred) for e in v.elts):
            return None
        off = _made_off(v.elts[j], r, scope)
        switch = _switch(off, ctx) if off is not None else None
        if switch is None or first is not None and first.node is not switch:
            return None
        first = first or Cut(GRAD_OFF, switch, v.elts[j])
    return first


def returns_off(ctx: Context, fn: ast.AST | None, element: int | None = None,
                arity: int | None = None) -> ast.AST | None:
    """The grad-off node (``@torch.no_grad()``, a ``with`` block) under which every value the
    function ``fn`` returns is made, or None; with ``element``, only that element of each
    returned tuple of ``arity`` values (``p_model, n = self.update_stats(logits, p_model)``).

    # NOTE [no-grad helpers]
    PyTorch records nothing while grad is off, so an operation or call made there has no
    ``grad_fn`` however its inputs were computed: such a result carries no graph into the
    caller. Each returned value (constants aside, at least one) is traced in ``fn`` alone
    (:func:`.grad_sources.local_sources`): it must be a name or hold a call, and come only from
    values made under grad-off (a name handed back as it was, an argument, keeps its
    history; ``enable_grad`` inside the block turns grad back on). Asked by GT2 (a helper's
    result in a loss) and GT5 (a binding that carries no graph)."""
    if not isinstance(fn, FUNCTION_TYPES):
        return None
    busy: set[tuple[int, int | None]] = ctx.memo("returns-off-busy", ctx.tree, set)
    if (id(fn), element) in busy:
        return None  # a function returning its own call (recursion): not off by itself
    busy.add((id(fn), element))
    try:
        return ctx.memo(f"returns-off:{element}:{arity}", fn,
                        lambda: _returns_off(ctx, fn, element, arity))
    finally:
        busy.discard((id(fn), element))


def _returns_off(ctx: Context, fn: ast.AST, element: int | None, arity: int | None
                 ) -> ast.AST | None:
    values = []
    attrs: list[ast.AST] = []
    for r in ctx.scope(fn).stmts:
        if not isinstance(r, ast.Return) or r.value is None or without_process_group(ctx, r):
            continue  # (the last: NOTE [arm without a process group])
        v = r.value
        if element is not None:
            if not isinstance(v, ast.Tuple) or len(v.elts) != arity:
                return None
            v = v.elts[element]
        if isinstance(v, ast.Constant):
            continue
        if _self_attr(v) is not None:  # NOTE [grad-off attribute]
            attr_off = _attr_off(ctx, fn, _self_attr(v))  # type: ignore[arg-type]
            if attr_off is None:
                return None
            attrs.append(attr_off)
            continue
        if not isinstance(v, ast.Name) and not any(isinstance(n, ast.Call) for n in walk(v)):
            return None
        values.append((v, r.lineno))
    tracer = local_sources(ctx, fn)
    off = attrs[0] if attrs else None
    for v, line in values:
        d = tracer.sources(v, line)
        if not d.dead or d.live or d.unknown or d.explicit_grad:
            d_off = _through_call(ctx, fn, v, line)  # NOTE [returned helper result]
            if d_off is None:
                return None
            off = off or d_off
            continue
        off = off or d.dead[0].off
    return off


def _through_call(ctx: Context, fn: ast.AST, v: ast.expr, line: int) -> ast.AST | None:
    """# NOTE [returned helper result]
    ``loss, acc = self._shared_step(batch); return loss`` (a Lightning-style ``training_step``
    handing on what a shared step made): the returned value is the result of a call of
    another function of the file, whole or one element of a tuple it unpacks, returned as it
    came. When that function makes every value it returns (that element of every tuple it
    returns) with grad off (NOTE [no-grad helpers]), so does this one: the grad-off region is
    the callee's. The callee is the analysis layer's (a helper, ``self.method``, a method of an
    instance of a class of the file: :func:`.reach.called_function`); a function that
    reaches itself again is not followed."""
    scope = ctx.scope(fn)
    element = arity = None
    call = v if isinstance(v, ast.Call) else None
    if isinstance(v, ast.Name):
        b = scope.binding_before(v.id, line)
        stmt = b.stmt if b is not None else None
        if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1 \
                or not isinstance(stmt.value, ast.Call):
            return None
        t = stmt.targets[0]
        if isinstance(t, ast.Tuple) and not any(isinstance(e, ast.Starred) for e in t.elts):
            names = [e.id if isinstance(e, ast.Name) else None for e in t.elts]
            if names.count(v.id) != 1:
                return None
            element, arity = names.index(v.id), len(names)
        elif not (isinstance(t, ast.Name) and t.id == v.id):
            return None
        call, line = stmt.value, stmt.lineno
    if call is None:
        return None
    callee = called_function(call, scope, line)
    return returns_off(ctx, callee, element, arity) if callee is not fn else None


def _self_attr(e: ast.expr) -> str | None:
    """``attr`` of ``self.attr``, else None."""
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
        return e.attr
    return None


def _attr_off(ctx: Context, fn: ast.AST, attr: str) -> ast.AST | None:
    """# NOTE [grad-off attribute]
    ``return self.ada_aug_p`` in a method: the attribute hands back whatever the class stored
    in it. When every store of ``self.<attr>`` in the class's methods is a constant
    (``self.p = 0`` in ``__init__``) or a value made with grad off (``self.p = min(1,
    max(0, self.p + step))`` in a method decorated ``@torch.no_grad()``; a read of the
    attribute itself is its earlier value, history-free by the same induction), the attribute
    never holds a graph: the grad-off region of the first such store is the cut. A store
    handing in a value as it came (an argument, ``self.p = pred``) keeps its history and
    refuses, as does a store in a tuple target or a deletion."""
    info = ctx.analysis.class_of(fn)
    if info is None:
        return None
    off = None
    for m in info.methods.values():
        tracer = None
        for s in walk(m):
            if isinstance(s, ast.Assign):
                targets, value = s.targets, s.value
            elif isinstance(s, (ast.AugAssign, ast.AnnAssign)):
                targets, value = [s.target], s.value
            else:
                continue
            if any(isinstance(t, (ast.Tuple, ast.List)) and any(
                    _self_attr(e) == attr for e in walk(t)) for t in targets):
                return None
            if not any(_self_attr(t) == attr for t in targets):
                continue
            if value is None or isinstance(value, ast.Constant):
                continue
            tracer = tracer or local_sources(ctx, m)
            d = tracer.sources(value, s.lineno)
            if not d.dead or d.live or d.unknown or d.explicit_grad:
                return None
            off = off or d.dead[0].off
    return off
