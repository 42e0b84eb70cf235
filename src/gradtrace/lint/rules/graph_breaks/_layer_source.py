"""Where a value of ``forward`` comes from, for GT105 (:class:`cuts.DataInLoss`): the names
the return values are built from, and the call of one of the module's layers a value holds
(through names and slice writes; never a ``PackedSequence``)."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from gradtrace.lint.analysis.reach import built_from, reaching, value_of
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.graph_breaks._paths import LossPaths, runs_layer

if TYPE_CHECKING:
    from gradtrace.lint.flow import Scope


def _return_deps(scope: Scope) -> set[str]:
    """Names the return values of a function are built from, through its assignments."""
    return built_from(scope, [s.value for s in scope.stmts
                              if isinstance(s, ast.Return) and s.value is not None])


def returned_assigns(scope: Scope) -> Iterator[ast.Assign]:
    """The ``name = value`` statements of a function, run with grad on, whose name its return
    values are built from: only the returns that can run after the statement count, never one
    in another arm of an ``if`` (a seq2seq ``forward`` whose training arm returns the loss
    built from ``out = self.decoder(...)`` and whose beam-search arm rebinds ``out =
    self.lsm(...).data`` for the beam: the second ``out`` reaches no return)."""
    rets = [s for s in scope.stmts if isinstance(s, ast.Return) and s.value is not None]
    memo: dict[tuple[int, ...], set[str]] = {}
    for s in scope.stmts:
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1
                and isinstance(s.targets[0], ast.Name) and scope.grad_off_at(s) is None):
            continue
        key = tuple(i for i, r in enumerate(rets) if not scope.exclusive(s, r))
        if key not in memo:
            memo[key] = built_from(scope, [rets[i].value for i in key])
        if s.targets[0].id in memo[key]:
            yield s


def _layer_source(e: ast.expr, lp: LossPaths) -> ast.AST | None:
    """The call of one of the module's layers whose output ``e`` holds (``self.encoder(x)``),
    also through names and slice writes (``buf[:k] = mem`` after ``out, mem = self.cell(...)``);
    None for a parameter or buffer (``self.weight``), for values computed from ``forward``'s
    inputs by functions and tensor methods (``torch.clamp(std / self.running_std, ...)`` in
    batch renormalization, ``td.select(...)``: the inputs still reach the output through their
    other uses), and for a ``PackedSequence`` (its ``.data`` field keeps the history)."""
    if isinstance(e, ast.Call):
        found = _layer_call(e)
    elif isinstance(e, ast.Name) and not _packed(e.id, lp, 0):
        found = next((c for v in _values_of(e, lp) if (c := _layer_call(v, lp)) is not None),
                     None)
    else:
        return None
    if found is None or not lp.trace(found, lp.scope.statement_of(found), found.lineno).live:
        return None
    return found


PACKED_FIELDS = ("batch_sizes", "sorted_indices", "unsorted_indices")


def _packed(name: str, lp: LossPaths, depth: int) -> bool:
    """Whether ``name`` holds a ``PackedSequence``: spelled so (``packed``), one of its own
    fields is read (``name.batch_sizes``), or it is bound to ``PackedSequence(...)`` /
    ``pack_padded_sequence(...)`` or to the output of a layer fed such a value (an RNN run on
    a packed input returns a packed output, ``out, _ = self.lstm(packed_in)``)."""
    if "pack" in name.lower():
        return True
    if depth > 3:
        return False
    if lp.ctx.mentions(*(f"{name}.{f}" for f in PACKED_FIELDS)) and any(
            isinstance(n, ast.Attribute) and n.attr in PACKED_FIELDS
            and isinstance(n.value, ast.Name) and n.value.id == name
            for s in lp.scope.stmts for n in walk(s)):
        return True
    for b in lp.scope.bindings.get(name, ()):
        v = value_of(b)
        while isinstance(v, ast.Subscript):
            v = v.value
        if not isinstance(v, ast.Call):
            continue
        callee = (dotted(v.func) or "").rpartition(".")[2]
        if callee == "PackedSequence" or callee.startswith("pack_"):
            return True
        if runs_layer(v) and any(isinstance(a, ast.Name) and a.id != name
                                 and _packed(a.id, lp, depth + 1) for a in v.args[:1]):
            return True
    return False


def _values_of(e: ast.Name, lp: LossPaths) -> Iterator[ast.AST]:
    """Every value bound to the name ``e`` reads that may reach the read: the bindings before
    it that reach its statement, and those of a loop around it (the next pass reads them);
    not a later rebinding (ZeroQ's ``w = self.weight``, ``w.data`` read for the range, then
    ``w = self.weight_function(self.weight, ...)``). And every value written into a slice of
    the name (``name[...] = v``)."""
    name, scope = e.id, lp.scope
    use = scope.statement_of(e)
    if use is None:
        bs: list = list(scope.bindings.get(name, ()))
    else:
        loops = scope.loops_of(use)
        bs = reaching(scope, name, e.lineno, use=use) + [
            b for b in scope.bindings.get(name, ()) if b.line >= e.lineno
            and any(lo.lineno <= b.line <= (lo.end_lineno or lo.lineno) for lo in loops)]
    for b in bs:
        v = value_of(b)
        if v is not None:
            yield v
    for st in lp.scope.stmts:
        if isinstance(st, ast.Assign) and any(
                isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                and t.value.id == name for t in st.targets):
            yield st.value


def _layer_call(v: ast.AST, lp: LossPaths | None = None) -> ast.Call | None:
    """A ``self.<layer>(...)`` call in ``v`` (with ``lp``: also one name away)."""
    for n in walk(v):
        if isinstance(n, ast.Call) and runs_layer(n):
            return n
    if lp is not None:
        for n in walk(v):
            if isinstance(n, ast.Name):
                for b in lp.scope.bindings.get(n.id, ()):
                    bv = value_of(b)
                    c = _layer_call(bv) if bv is not None else None
                    if c is not None:
                        return c
    return None
