"""GT602/GT603's writes into a module's result in a class's ``forward``: ``out =
self.<attr>(...)`` then an in-place write into ``out``, or one chained on the call
(``conv(x).unsqueeze_(1)``). Read through :class:`._base.InplaceRule`; the per-statement
tests they share with the function scan live in :mod:`._saved`.
"""
from __future__ import annotations

import ast
import re
from typing import Any, Iterator

from gradtrace.lint.analysis.trained_methods import SKIPPED
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rules.inplace._chained import init_says_inplace, may_write, nested_layer_writes
from gradtrace.lint.rules.inplace._listed import (
    _element_set, _listed_call, _may_pair, unviewed, view_aliases,
)
from gradtrace.lint.rules.inplace._ops import (
    SAVED_OUT, VIEW_METHODS, _LazyModules, _statements, module_call_op,
)
from gradtrace.lint.rules.inplace._saved import (
    ARITH_WRITES, NOT_WRITES, Producer, _eval_branch, _is_autograd_function,
    _other_arm, _path_to, _rebinds, _runs_as_forward, _write_target, _written_name,
)
from gradtrace.lint.rules.inplace._tuple_results import element_op


def class_writes(cls: ast.ClassDef, ctx: Context, families: tuple[str, ...],
                 kinds: tuple[str, ...]) -> Iterator[tuple[Producer, ast.stmt, ast.AST]]:
    """(producer, write, target) in a module's ``forward``: ``out = self.<attr>(...)`` where
    ``self.<attr>`` is a module built in ``__init__`` whose result an op that saves it makes
    (NOTE [module results]: an activation, a Sequential or a block of the file ending in one,
    a block of a ModuleList by index or in a loop), then an in-place write of the given kind
    into ``out`` before it is rebound. The writes are found first (once per class); the
    module's op is read only for a call whose result is written."""
    pairs = ctx.memo("gt6-class-writes", cls, lambda: _class_pairs(cls, ctx))
    if not pairs:
        return
    modules = ctx.memo("gt6-modules-all", cls, lambda: _LazyModules(cls, ctx, True))
    for call, s, w, scope, place in pairs:
        if w[1] not in kinds:
            continue
        op = module_call_op(call, ctx, modules, scope, s) if place is None else \
            element_op(call, place[0], place[1], cls, ctx, scope)
        if op is None or SAVED_OUT.get(op, "relu") not in families:
            continue
        yield Producer(call, op, SAVED_OUT.get(op, "relu")), s, w[2]


def _class_pairs(cls: ast.ClassDef, ctx: Context) -> list[tuple[Any, ast.stmt, tuple, Any]]:
    """(the module call of ``out = <module call>``, a later in-place write into ``out``, its
    target, the scope) in the ``forward`` (or ``__call__``) of ``cls``, outside eval-only
    branches and grad-off; also a write chained on the call (``conv(x).unsqueeze_(1)``)."""
    out: list[tuple[Any, ast.stmt, tuple, Any]] = []
    modules = ctx.memo("gt6-modules-all", cls, lambda: _LazyModules(cls, ctx, True))
    if _is_autograd_function(cls, None, ctx):  # its bases (once, not once per method)
        return out
    for fn in cls.body:
        if not isinstance(fn, FUNCTION_TYPES) or fn.name in SKIPPED \
                or _is_autograd_function(cls, fn, ctx, False):
            continue  # `__init__` never runs as forward, widened or not: known before its scan
        if not may_write(cls, fn, ctx, modules):
            continue  # no in-place write in it (NOTE [write spelling]): nothing to pair
        stmts = list(_statements(fn.body))
        maybe_chained = _file_chains(ctx) and CHAINED_RE.search("\n".join(  # from the text:
            ctx.code_lines[fn.lineno - 1:fn.end_lineno or fn.lineno])) is not None  # `conv(x).f_(`
        nesting = init_says_inplace(cls, ctx) and "(self." in "\n".join(
            ctx.code_lines[fn.lineno - 1:fn.end_lineno or fn.lineno])
        written: dict[str, list[int]] = {}  # the in-place writes, found once: the pairs are
        chains: list[tuple] = []            # rare, a scan of the rest per call is quadratic
        for j, s in enumerate(stmts):
            got = _written_name(s)
            if got is not None:
                written.setdefault(got, []).append(j)
            elif maybe_chained and (chained := _chained_write(s)) is not None:
                chains.append((s, chained))
            if nesting:  # `self.dropout(self.mlp(x))` (NOTE [chained saved output])
                chains.extend((s, c) for c in nested_layer_writes(s, modules))
        views = view_aliases(stmts, written)  # `w = out[..., :n]; w /= c` writes into `out`
        if not _runs_as_forward(cls, fn.name, ctx) and (  # a pair first: the cheap test
                not chains and not _may_pair(stmts, written)
                or not _runs_as_forward(cls, fn.name, ctx, True)):
            continue
        scope = None
        for s, chained in chains:
            if not _eval_branch(_path_to(fn.body, s)):
                scope = scope or ctx.scope(fn)
                if scope.grad_off_at(s) is None:
                    out.append((chained[0], s, chained[1], scope, None))
        if not written:
            continue
        moves: list[tuple[int, str, str]] | None = None
        for i, stmt in enumerate(stmts):
            listed = _listed_call(stmt)
            if listed is not None:  # `outs = [blk(x) for blk, x in zip(self.blocks, xs)]`
                name, call = listed
                for k in written.get(name, ()):
                    s = stmts[k]
                    if k > i and isinstance(s, ast.AugAssign) \
                            and isinstance(s.target, ast.Subscript) \
                            and not _eval_branch(_path_to(fn.body, s)) \
                            and not any(_rebinds(x, name) or _element_set(x, name)
                                        for x in stmts[i + 1:k]):
                        scope = scope or ctx.scope(fn)
                        if scope.grad_off_at(stmt) is None:
                            out.append((call, s, (name, "aug", s.target), scope, None))
                continue
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and isinstance(stmt.value, ast.Call)
                    and isinstance(stmt.value.func, (ast.Attribute, ast.Subscript, ast.Name))):
                continue
            t = stmt.targets[0]
            places = [(dotted(t), None)] if not isinstance(t, ast.Tuple) else [
                (e.id, (j, len(t.elts))) for j, e in enumerate(t.elts)
                if isinstance(e, ast.Name)]  # NOTE [tuple module results]
            for name, place in places:
                if name is None:
                    continue
                if moves is None:  # the plain `a = b` into a written name, once per method
                    moves = _moves(stmts, written)
                for k, s, w in _writes_into(stmts, i, name, written, views, ctx, modules,
                                            moves):
                    if not _eval_branch(_path_to(fn.body, s)):
                        scope = scope or ctx.scope(fn)
                        if scope.grad_off_at(stmt) is None and (k == i or not _alias_arm(
                                scope, stmts, k, s)):
                            out.append((unviewed(stmt.value), s, w, scope, place))
    return out


def _moves(stmts: list[ast.stmt], written: dict[str, list[int]]) -> list[tuple[int, str, str]]:
    """(index, name, alias) for each ``alias = name`` of ``stmts`` (plain names, two of them)
    whose alias is written in place: the statements where :func:`._saved._alias_of` names an
    alias that :func:`_writes_into` follows, found in one pass per method instead of a scan of
    the later statements per binding."""
    return [(k, s.value.id, s.targets[0].id) for k, s in enumerate(stmts)
            if isinstance(s, ast.Assign) and len(s.targets) == 1
            and isinstance(s.targets[0], ast.Name) and isinstance(s.value, ast.Name)
            and s.targets[0].id in written and s.value.id != s.targets[0].id]


def _writes_into(stmts: list[ast.stmt], i: int, name: str, written: dict[str, list[int]],
                 views: dict, ctx: Context, modules: Any, moves: list[tuple[int, str, str]]
                 ) -> Iterator[tuple[int, ast.stmt, tuple]]:
    """(the binding's index: ``i``, or the alias's, the write, its target) for each in-place
    write into ``name`` after ``stmts[i]`` until it is rebound, and into a plain alias of it
    (``acc = out``, NOTE [accumulator alias]) until the alias is rebound; ``moves`` is
    :func:`_moves` of ``stmts``."""
    aliases = {k: a for k, src, a in moves if k > i and src == name}
    if not any(j > i for j in written.get(name, ())) and not aliases:
        return
    for k in range(i + 1, len(stmts)):
        s = stmts[k]
        if k in written.get(name, ()):
            w = _write_target(s, ctx, modules)
            if w is not None and name in (w[0], views.get(w[0])):
                yield i, s, w
        alias = aliases.get(k)
        if alias is not None:
            for m in range(k + 1, len(stmts)):
                if m in written.get(alias, ()):  # type: ignore[arg-type]
                    w = _write_target(stmts[m], ctx, modules)
                    if w is not None and w[0] == alias:
                        yield k, stmts[m], w
                if _rebinds(stmts[m], alias):  # type: ignore[arg-type]
                    break
        if _rebinds(s, name):
            break


def _alias_arm(scope: Any, stmts: list[ast.stmt], k: int, write: ast.stmt) -> bool:
    """The alias ``stmts[k]`` and the write are on two arms of one ``if`` with no loop around
    both that can run the one, then the other (:func:`._saved._other_arm`)."""
    alias = stmts[k].targets[0].id  # type: ignore[attr-defined]
    return _other_arm(scope, stmts[k], write, alias)


CHAINED_RE = re.compile(r"\)\s*\.\s*[a-z]\w*_\(")


def _file_chains(ctx: Context) -> bool:
    """The file's code text holds an in-place method called on a call's result."""
    return ctx.memo("gt6-chains", ctx.tree, lambda: CHAINED_RE.search(ctx.code) is not None)


def _chained_write(s: ast.stmt) -> tuple[ast.Call, tuple] | None:
    """(the module call, the write) for ``fea = conv(x).unsqueeze_(dim=1)`` or
    ``self.act(x).mul_(2)``: an in-place method called straight on a call's result (through
    views), the result never named."""
    v = s.value if isinstance(s, (ast.Assign, ast.Expr)) else None
    if not (isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute)):
        return None
    m = v.func.attr
    if not m.endswith("_") or m.startswith("_") or m in NOT_WRITES:
        return None
    recv = v.func.value
    while isinstance(recv, ast.Call) and isinstance(recv.func, ast.Attribute) \
            and recv.func.attr in VIEW_METHODS:
        recv = recv.func.value
    f = recv.func if isinstance(recv, ast.Call) else None
    if not (isinstance(f, (ast.Name, ast.Subscript)) or isinstance(f, ast.Attribute)
            and isinstance(f.value, ast.Name) and f.value.id == "self"):
        return None  # a module: `conv(x)`, `self.act(x)`, `self.blocks[i](x)`
    return recv, ("<result>", "arith" if m in ARITH_WRITES else "method", v)
