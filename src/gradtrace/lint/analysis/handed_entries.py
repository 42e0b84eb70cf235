"""A term of a loss of the file that reaches the model only through a cut of what it is handed.

# NOTE [entry cut before the loss]
``out = model(x)``, ``out["x_hat"] = out["x_hat"].detach().clamp(0, 1)``, then
``losses = criterion(out, x)`` and ``losses["loss"].backward()``: the loss is a module class
of the file that holds no weights (NOTE [weightless class of the file]; buffers and leaves it
makes in ``forward`` allowed) or a function of the file, and its ``forward`` builds the
returned loss from terms (NOTE [loss paths]), one read from ``output["x_hat"]`` (the
distortion), another from ``output["likelihoods"]`` (the rate). The dict keeps a path to the
model through its other entries, so the backward raises nothing and no "only path" reading
fires; but the distortion term reads nothing but the cut entry and the data: it is a
constant, and what produced ``x_hat`` (the decoder) gets no gradient from it. The same holds
when the loss cuts the prediction itself (``pred = pred.argmax(1).float()`` in an image
gradient loss beside a cross-entropy: the term is a constant). :func:`handed_entry_cuts`
reads, for a live term of the caller's loss that is (an entry of) such a call's value, the
callee's terms of the returned value (the entry of the same constant key of every returned
dict literal), each term's reads of its parameters (a parameter, or one of its entries by a
constant key, through the callee's names bound before; sizes and ``self`` settings are no
reads) with the bindings the callee's tracer finds cut kept apart, and, per read, what the
caller hands: an entry the caller replaced by a cut value after the dict was bound and before
the call (in the call's block or an enclosing one: on every path), a value the caller traces
dead (data), or a live one. A term whose reads are all cut entries or data, with at least one
cut of a value the caller hands live, is cut there: the finding is that cut (the caller's, or
the callee's). A term reading anything else (a global, an unknown name) is left live. Only
asked when the caller's loss has a live term and nothing else is cut.
"""
from __future__ import annotations

import ast
import builtins
from typing import TYPE_CHECKING, Callable

from gradtrace.lint.analysis.cuts import Cut
from gradtrace.lint.analysis.weightless_classes import weightless_but_leaves
from gradtrace.lint.flow import MODULE
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.nodes import parent_map, walk

if TYPE_CHECKING:
    from gradtrace.lint.analysis.origins import Tracer
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

Fn = ast.FunctionDef | ast.AsyncFunctionDef
Read = tuple[str, "str | None"]  # (parameter, constant key or None: the whole value)
MAX_HOPS = 6


def handed_entry_cuts(lp: Tracer, term: ast.expr, use: ast.stmt | None, line: int,
                      callee_paths: Callable[[Fn], Tracer]) -> tuple[Cut, ...]:
    """NOTE [entry cut before the loss]: the cuts that leave the loss ``term`` (read at
    ``line`` in ``use``) with a term of the callee reaching the model only through them;
    ``callee_paths(fn)``: the loss-path analysis of a callee (its ``terms`` and ``trace``)."""
    key, e = _key(term)
    call, at, at_line = None, use, line
    if isinstance(e, ast.Name):
        bs = lp.bindings_at(e.id, use, line)
        if len(bs) == 1 and isinstance(bs[0].value, ast.Call):
            call, at, at_line = bs[0].value, bs[0].stmt, bs[0].line
    elif isinstance(e, ast.Call):
        call = e
    if call is None or not call.args:
        return ()
    fn = _loss_callee(lp, call, at_line)
    if fn is None:
        return ()
    handed = _handed(fn, call)
    cut = {}  # (param, key) -> the caller's cut of that entry
    for p, a in handed.items():
        if isinstance(a, ast.Name):
            for k, c in _entries_cut(lp, a.id, call, at, at_line):
                cut[(p, k)] = c
    settings = _settings(fn) - set(handed)
    live = {(p, None) for p, a in handed.items() if lp.trace(a, at, at_line).live}
    data = {(p, None) for p in settings | set(handed)} - live
    found: list[Cut] = []
    clp = callee_paths(fn)  # (its own class read from the tree: NOTE [loss paths])
    for value, ret in _returned(fn, key):
        for t in clp.terms(value, ret, ret.lineno):  # type: ignore[attr-defined]
            reader = _Reader(clp, lp.ctx.imports.aliases)
            reads = reader.reads(t, ret.lineno, 0)
            if reads is None:
                continue
            hits = [cut[r] for r in reads if r in cut] + [
                c for c, rs in reader.cuts if any(r in cut or r in live for r in rs)]
            if hits and all(r in cut or r in data for r in reads):
                found.extend(hits)
    return tuple(dict.fromkeys(found))


def _key(e: ast.expr) -> tuple[str | None, ast.expr]:
    if isinstance(e, ast.Subscript) and isinstance(e.slice, ast.Constant) \
            and isinstance(e.slice.value, str):
        return e.slice.value, e.value
    return None, e


def _loss_callee(lp: Tracer, call: ast.Call, line: int) -> Fn | None:
    """The ``forward`` of a weightless module class of the file an instance call runs, or a
    function of the file called by name."""
    a = lp.ctx.analysis
    fn = a.local_callee(call, lp.scope, line)
    if fn is not None:
        return fn if a.class_of(fn) is None else None
    k = a.kind(call.func, lp.scope, line)
    if k is None or k.what != MODULE or not k.cls or not weightless_but_leaves(k.cls, lp.ctx):
        return None
    return a.classes[k.cls].methods.get("forward")  # type: ignore[index]


def _handed(fn: Fn, call: ast.Call) -> dict[str, ast.expr]:
    names = [x.arg for x in (*fn.args.posonlyargs, *fn.args.args)]
    if names and names[0] == "self":
        names = names[1:]
    if any(isinstance(v, ast.Starred) for v in call.args) or len(call.args) > len(names):
        return {}
    out = dict(zip(names, call.args))
    out.update((k.arg, k.value) for k in call.keywords if k.arg is not None)
    return out


def _settings(fn: Fn) -> set[str]:
    """The parameters of ``fn`` with a constant default (``lmbda=0.01``)."""
    a = fn.args
    pos = [*a.posonlyargs, *a.args]
    pairs = [*zip(pos[len(pos) - len(a.defaults):], a.defaults),
             *zip(a.kwonlyargs, a.kw_defaults)]
    return {p.arg for p, d in pairs if isinstance(d, ast.Constant)}


def _entries_cut(lp: Tracer, name: str, call: ast.Call, at: ast.stmt | None,
                 line: int) -> list[tuple[str, Cut]]:
    """``name[k] = <cut value>`` statements of the caller after ``name``'s binding and before
    the call, in a block that holds the call, whose value the tracer finds dead and cut, while
    ``name`` itself is live (a model's output dict)."""
    scope = lp.scope
    b = scope.binding_before(name, line)
    if b is None or b.value is None or not lp.trace(b.value, b.stmt, b.line).live:
        return []
    parents = lp.ctx.memo("handed-entries-parents", scope.node, lambda: parent_map(scope.node))
    out = []
    for s in walk(scope.node):
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and b.line < s.lineno < line):
            continue
        t = s.targets[0]
        if not (isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                and t.value.id == name and isinstance(t.slice, ast.Constant)
                and isinstance(t.slice.value, str)):
            continue
        up = parents.get(id(s))
        if up is None or not (up.lineno <= line <= (up.end_lineno or 0)  # type: ignore
                              or up is scope.node) or isinstance(up, ast.If):
            continue  # on one arm only, or beside the call's block
        tr = lp.trace(s.value, s, s.lineno)
        if not tr.live and tr.cuts:
            out.append((t.slice.value, tr.cuts[0]))
    return out


def _returned(fn: Fn, key: str | None) -> list[tuple[ast.expr, ast.Return]]:
    """The value every ``return`` of ``fn`` gives for ``key`` (a dict literal's entry), or the
    returned value itself; nothing unless every return gives one."""
    out = []
    for r in walk(fn):
        if isinstance(r, FUNCTION_TYPES) and r is not fn:
            return []  # a nested function: its returns are not ours to tell apart
        if not isinstance(r, ast.Return):
            continue
        v = r.value
        if key is not None:
            v = next((val for k, val in zip(v.keys, v.values) if isinstance(k, ast.Constant)
                      and k.value == key), None) if isinstance(v, ast.Dict) else None
        if v is None:
            return []
        out.append((v, r))
    return out


_SIZES = frozenset({"shape", "ndim", "device", "dtype"})


class _Reader:
    """The parameters (and constant entries of them) a callee's value reads, through the
    callee's bindings; a binding its tracer finds cut (``pred = pred.argmax(1).float()``) is
    kept apart in :attr:`cuts` with what the cut value was made from."""

    def __init__(self, clp: Tracer, imported: dict[str, str]) -> None:
        self.clp, self.scope, self.imported = clp, clp.scope, imported
        a = self.scope.node.args  # type: ignore[attr-defined]
        self.params = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)} - {"self"}
        self.cuts: list[tuple[Cut, set[Read]]] = []
        self.seen: set[str] = set()

    def reads(self, e: ast.AST, line: int, depth: int) -> set[Read] | None:
        """None: ``e`` reads something else that may hold a graph."""
        if depth > MAX_HOPS:
            return None
        out: set[Read] = set()
        bound = {n.id for c in walk(e) if isinstance(c, ast.comprehension)
                 for n in walk(c.target) if isinstance(n, ast.Name)}
        todo: list[ast.AST] = [e]
        while todo:
            n = todo.pop()
            if isinstance(n, ast.Attribute) and (n.attr in _SIZES or isinstance(
                    n.value, ast.Name) and n.value.id == "self") or isinstance(
                    n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "size":
                continue  # a size; a weightless module's settings and losses
            if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) \
                    and n.value.id in self.params and isinstance(n.slice, ast.Constant) \
                    and not self.scope.bindings_before(n.value.id, line):
                out.add((n.value.id, n.slice.value))
                continue
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in bound:
                got = self._name(n.id, line, depth)
                if got is None:
                    return None
                out |= got
                continue
            todo.extend(ast.iter_child_nodes(n))
        return out

    def _name(self, name: str, line: int, depth: int) -> set[Read] | None:
        bs = [b for b in self.scope.bindings_before(name, line) if b.value is not None]
        if not bs:
            if name in self.params:
                return {(name, None)}
            ok = name in self.imported or hasattr(builtins, name)
            return set() if ok else None  # a global, a name of unknown origin
        if name in self.seen:
            return set()
        self.seen.add(name)
        out: set[Read] = set()
        for b in bs:
            tr = self.clp.trace(b.value, b.stmt, b.line)
            if not tr.live and tr.cuts:
                made = self.reads(tr.cuts[0].operand, b.line, depth + 1)
                if made is None:
                    return None
                self.cuts.append((tr.cuts[0], made))
                continue
            got = self.reads(b.value, b.line, depth + 1)
            if got is None:
                return None
            out |= got
        return out
