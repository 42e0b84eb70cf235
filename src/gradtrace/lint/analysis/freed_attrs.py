"""Graphs a method stores on ``self`` and frees with its own backward, read again by a later
method's loss.

# NOTE [attribute freed by an earlier method]
A GAN model class in the pix2pix style splits a training step into methods: ``backward_D``
computes ``self.pred_fake = self.netD(fake.detach())``, builds ``self.loss_D`` from it and
runs ``self.loss_D.backward()``; ``backward_G``, run after it by ``optimize_parameters``,
builds the generator's loss. When that loss reads ``self.pred_fake`` again (not a prediction
of its own), its backward reaches the part of the graph ``loss_D.backward()`` freed and raises
``RuntimeError: Trying to backward through the graph a second time`` (Shift-Net issue 34;
checked on torch 2.13). :func:`freed_attrs` gives, for a method, the ``self.<a>`` it binds to
a value carrying a graph (NOTE [graph-carrying bindings]) that a backward of its own, without
``retain_graph``, reaches after the binding; :func:`later_reads` the reads of such an
attribute, outside any cut, in the values a later method's backward reaches, where that
method has not bound it itself before. *Later* means: some method of the class calls
``self.A()`` and then ``self.B()`` in one body, and no call in between (nor ``B`` itself
before the read) binds the attribute again.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from gradtrace.lint.analysis.graph_deps import graphs, loads
from gradtrace.lint.analysis.steps import Backward, step_calls
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import scope_statements

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context

Fn = ast.FunctionDef | ast.AsyncFunctionDef


def freed_attrs(ctx: Context, fn: Fn) -> dict[str, Backward]:
    """``"self.<a>"`` -> the backward of ``fn`` that frees the graph ``fn`` bound to it."""
    def make() -> dict[str, Backward]:
        out: dict[str, Backward] = {}
        bws = [b for b in step_calls(ctx, fn).losses() if not b.retains and b.inputs is None]
        if not bws:
            return out
        scope = ctx.scope(fn)
        g = graphs(scope)
        for bw in bws:
            for b in g.deps(bw.loss, bw.call.lineno).bindings:  # type: ignore[arg-type]
                if b.name.startswith("self.") and b.name.count(".") == 1 and \
                        b.line < bw.call.lineno and g.direct(b):
                    out.setdefault(b.name, bw)
        return out
    return ctx.memo("freed-attrs", fn, make)


def _self_calls(fn: Fn) -> list[ast.Call]:
    return sorted((n for s in scope_statements(fn) for n in _own_calls(s)),
                  key=lambda c: (c.lineno, c.col_offset))


def _own_calls(s: ast.AST) -> Iterator[ast.Call]:
    for f in ("value", "targets", "test", "iter", "items"):
        v = getattr(s, f, None)
        for root in (v if isinstance(v, list) else [v]):
            if isinstance(root, ast.AST):
                for n in ast.walk(root):
                    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                            dotted(n.func.value) == "self":
                        yield n


def _callers(ctx: Context, cls: ClassInfo) -> dict[str, list[tuple[Fn, list[ast.Call]]]]:
    """Method name -> the methods of ``cls`` calling ``self.<name>(...)``, with their
    ``self.<m>(...)`` calls in source order (one walk of the class, cached)."""
    def make() -> dict[str, list[tuple[Fn, list[ast.Call]]]]:
        out: dict[str, list[tuple[Fn, list[ast.Call]]]] = {}
        for caller in cls.methods.values():
            calls = _self_calls(caller)
            for name in {c.func.attr for c in calls}:  # type: ignore[attr-defined]
                out.setdefault(name, []).append((caller, calls))
        return out
    return ctx.memo("self-callers", cls.node, make)


def earlier_methods(ctx: Context, cls: ClassInfo, fn: Fn) -> list[tuple[Fn, frozenset[str]]]:
    """Methods ``A`` of ``cls`` that one of its methods runs (``self.A()``) before
    ``self.<fn>()``, each with the attributes bound by the methods run in between."""
    out: list[tuple[Fn, frozenset[str]]] = []
    for caller, calls in _callers(ctx, cls).get(fn.name, ()):
        at = [i for i, c in enumerate(calls) if c.func.attr == fn.name]  # type: ignore[attr-defined]
        if not at:
            continue
        for i, c in enumerate(calls[:at[0]]):
            a = cls.methods.get(c.func.attr)  # type: ignore[attr-defined]
            if a is None or a is fn or a is caller:
                continue
            between = [cls.methods.get(x.func.attr)  # type: ignore[attr-defined]
                       for x in calls[i + 1:at[0]]]
            bound = frozenset(n for m in between if m is not None for n in _bound_attrs(m))
            out.append((a, bound))
    return out


def _bound_attrs(fn: Fn) -> set[str]:
    out = set()
    for n in ast.walk(fn):
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for tg in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                for t in ast.walk(tg):
                    d = dotted(t) if isinstance(t, ast.Attribute) else None
                    if d is not None and d.startswith("self."):
                        out.add(d)
    return out


def later_reads(ctx: Context, cls: ClassInfo, fn: Fn
                ) -> Iterator[tuple[ast.stmt, str, Fn, Backward, Backward]]:
    """(statement of ``fn`` reading it, ``"self.<a>"``, the earlier method, its backward, the
    backward of ``fn``) for each attribute an earlier method freed that a backward of ``fn``
    reaches again (NOTE [attribute freed by an earlier method])."""
    bws = [b for b in step_calls(ctx, fn).losses() if b.inputs is None]
    if not bws:
        return
    freed: dict[str, tuple[Fn, Backward]] = {}
    for a, bound in earlier_methods(ctx, cls, fn):
        for attr, bw in freed_attrs(ctx, a).items():
            if attr not in bound:
                freed.setdefault(attr, (a, bw))
    if not freed:
        return
    scope = ctx.scope(fn)
    g = graphs(scope)
    seen: set[str] = set()
    for bw in bws:
        line = bw.call.lineno
        values: list[tuple[ast.AST, ast.AST, int]] = [(bw.loss, bw.stmt, line)]  # type: ignore[list-item]
        values += [(b.value, b.stmt, b.line) for b in g.deps(bw.loss, line).bindings  # type: ignore[arg-type]
                   if b.value is not None]
        for v, stmt, at in values:
            for name, _ in loads(v):
                if name in freed and name not in seen and \
                        scope.binding_before(name, at) is None:
                    seen.add(name)
                    a, first = freed[name]
                    yield stmt, name, a, first, bw  # type: ignore[misc]
