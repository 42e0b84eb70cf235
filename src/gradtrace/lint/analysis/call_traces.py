"""What a call of a method or of a tensor constructor carries: the part of
:class:`~.origins.Tracer` that reads one call (its receiver, its arguments, a rebuilt tensor),
and the cut it makes (:meth:`CallTraces._cut`).

A base of :class:`~.origins.Tracer`, which supplies ``scope``, ``ctx``, ``trace``, ``_all`` and
``bindings_at``; holds no state of its own.
"""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.cuts import (
    CUT_METHODS, DEAD, DETACH, NUMBER, FRESH_METHODS, LIVE, NON_TENSOR_KWARGS, REBUILD, RECV_ONLY,
    Cut, Trace,
    asks_grad, detached_copy, peel,
)
from gradtrace.lint.analysis.inplace_detach import detached_in_place
from gradtrace.lint.analysis.kinds import LOADER
from gradtrace.lint.analysis.objects import number_callable_field
from gradtrace.lint.analysis.vocabulary import DATA_ITER_RE
from gradtrace.lint.nodes import walk


class CallTraces:
    """The call-reading methods of :class:`~.origins.Tracer` (a base class only)."""

    def _cut(self, kind: str, node: ast.expr, operands: list[ast.expr],
             use: ast.stmt | None, line: int) -> Trace:
        inner = self._all(operands, use, line)
        if inner.live:
            live = next((o for o in operands if self.trace(o, use, line).live), operands[0])
            return Trace(False, (Cut(kind, node, live),))
        return Trace(False, inner.cuts)

    def _detached_after(self, name: str, bs: list, use: ast.stmt | None, line: int,
                        t: Trace) -> Trace:
        """``t`` (the trace of ``name`` through its bindings ``bs``), cut where a statement
        detached the value in place before ``line`` (NOTE [detached in place])."""
        if not t.live or not bs:
            return t
        got = detached_in_place(self.ctx, self.scope, name, max(b.line for b in bs), use, line)
        if got is None:
            return t
        s, cut = got
        return Trace(False, (Cut(DETACH, cut, cut.func.value, ((name, s.lineno),)),))

    def _unaliased(self, f: ast.expr) -> ast.expr:
        """The function ``f`` names: ``cal_loss`` for ``criterion`` when every binding of it
        here is ``criterion = cal_loss``."""
        vs = [b.value for b in self.scope.bindings.get(f.id, ())] if isinstance(f, ast.Name) \
            else []
        return vs[0] if vs and all(isinstance(v, ast.Name) and v.id == vs[0].id  # type: ignore
                                   for v in vs) else f

    def _element(self, it: ast.expr, use: ast.stmt | None, line: int) -> Trace:
        """``next(it)``, ``iter(loader)``: an element of what ``it`` iterates over, read as a
        ``for`` loop reads it (:meth:`binding_trace`): a data loader hands out data (a
        ``DataLoader`` here, or spelled like one), anything else what it holds
        (``next(iter(model.parameters()))`` is a parameter)."""
        kind = self.ctx.analysis.kind(it, self.scope, line)
        if kind is not None and kind.what == LOADER or DATA_ITER_RE.search(self.ctx.code_of(it)):
            return DEAD
        return self.trace(it, use, line)

    def _method(self, e: ast.Call, func: ast.Attribute, use: ast.stmt | None,
                line: int) -> Trace:
        m = func.attr
        if m in CUT_METHODS and not (m in ("round", "int", "long", "bool") and e.args):
            return self._cut(CUT_METHODS[m], e, [peel(func.value)], use, line)
        if m in FRESH_METHODS:
            return DEAD
        if m == "new_tensor" and e.args:
            return self._rebuild(e, use, line)
        off = bool(e.args) and isinstance(e.args[0], ast.Constant) and e.args[0].value is False
        if m == "requires_grad_" and not off and detached_copy(func.value):
            return LIVE  # `x.detach().requires_grad_()`: a new input leaf, on purpose
        if isinstance(func.value, ast.Name) and func.value.id == "self":
            cls = self.ctx.analysis.class_of(self.scope.node)
            if cls is not None and number_callable_field(cls, m, self.ctx):
                return DEAD  # `self.get_reward(s)`: the caller gave a callable returning a number
        recv = self.trace(func.value, use, line)
        if m == "requires_grad_" and not recv.live and not recv.cuts and not off:
            return LIVE  # a new trainable leaf; on a cut value it stays cut (a band-aid)
        if m in RECV_ONLY:
            return recv
        return recv | self.args_trace(e, use, line)

    def args_trace(self, e: ast.Call, use: ast.stmt | None, line: int) -> Trace:
        kws = [k.value for k in e.keywords if k.arg not in NON_TENSOR_KWARGS]
        return self._all([*e.args, *kws], use, line)

    def _sequence(self, a: ast.expr, use: ast.stmt | None, line: int) -> bool:
        """A list or tuple (literal, comprehension, or a name bound only to one), or a Python
        number a function of the file returns (NOTE [number handed back]): unlike a tensor,
        which ``torch.as_tensor`` returns as is, it is copied into a new leaf."""
        if isinstance(a, (ast.List, ast.Tuple, ast.ListComp)) or self._number_made(a, line):
            return True
        if not isinstance(a, ast.Name):
            return False
        values = [b.value for b in self.bindings_at(a.id, use, line)]
        return bool(values) and all(isinstance(v, (ast.List, ast.Tuple, ast.ListComp))
                                    or isinstance(v, ast.Call) and self._number_made(v, line)
                                    for v in values)

    def _number_made(self, a: ast.expr, line: int) -> bool:
        # NOTE [number handed back]
        # ``torch.as_tensor(huber(pred, y)).requires_grad_()`` with ``huber`` a function of the
        # file whose every ``return`` is ``....item()`` / ``float(...)``: the caller re-wraps the
        # number the helper made, a new leaf with no history (as ``torch.tensor`` of it is).
        from gradtrace.lint.analysis.reach import called_function
        fn = called_function(a, self.scope, line) if isinstance(a, ast.Call) else None
        if fn is None:
            return False
        rets = [s.value for s in walk(fn) if isinstance(s, ast.Return)]
        return bool(rets) and all(isinstance(r, ast.Call) and (
            isinstance(r.func, ast.Attribute) and CUT_METHODS.get(r.func.attr) == NUMBER
            or self.ctx.qualified_name(r.func) == "float") for r in rets)

    def _rebuild(self, e: ast.Call, use: ast.stmt | None, line: int) -> Trace:
        if not e.args:
            return LIVE if asks_grad(e) else DEAD
        t = self._cut(REBUILD, e, [e.args[0]], use, line)
        if not t.cuts and asks_grad(e):
            return LIVE  # a new trainable leaf: `torch.tensor(0.5, requires_grad=True)`
        return t
