"""GT509's fact about the entries of a dict a helper returns: those a loss reads without the
helper's graph.

# NOTE [entries read without the graph]
`gen_outputs = self.forward_generator_step(clean, noisy)` returns a dict literal; the
generator's loss reads its entries and is backpropagated, the generator stepped; then the
discriminator's loss reads `gen_outputs["clean_mag"]` (made from the clean input alone: an
STFT magnitude, no model in its making) and `gen_outputs["est_mag"].detach()` (CMGAN's
metric discriminator). Neither read runs through the freed graph, so the second backward
does not raise. Every read of the dict by the second loss must be of a constant key, either
detached right there or, in every dict literal the helper returns, an entry whose value is
made by no call of `self`, of a parameter or of a local callable (only functions imported by
the file and methods of the values, reading the helper's parameters, factories, constants and
the settings `__init__` gives `self`; another attribute of `self` only as the argument of a
factory or of `.to(...)`). A whole
read of the dict, an unknown entry, or an entry one of whose makings runs a model keeps the
finding.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.lint.analysis.reach import called_function, value_of
from gradtrace.lint.flow import FACTORY_FUNCS, Binding
from gradtrace.lint.nodes import bfs_walk, child_nodes, walk
from gradtrace.lint.rules.training_loop._loop import Backward, LoopFacts

MOVES = frozenset({"to", "cuda", "cpu", "float", "double", "half"})


def reads_without_graph(f: LoopFacts, t: Binding, b: Backward, deps: object) -> bool:
    """The loss of ``b`` (and the bindings it depends on, ``deps``) reads ``t``, a dict a
    helper of the file returned, only through entries without its graph
    (NOTE [entries read without the graph])."""
    fn = called_function(t.stmt.value, f.scope, t.line) \
        if isinstance(t.stmt, ast.Assign) and isinstance(t.stmt.value, ast.Call) else None
    if fn is None:
        return False
    seen = False
    for p, parents in name_reads(f, t, b, deps):
        seen = True
        if not (isinstance(p, ast.Subscript) and isinstance(p.slice, ast.Constant)):
            return False
        q = parents.get(id(p))
        detached = isinstance(q, ast.Attribute) and q.attr == "detach" and isinstance(
            parents.get(id(q)), ast.Call)
        if not detached and not _entry_without_graph(f, fn, p.slice.value):
            return False
    return seen


def name_reads(f: LoopFacts, t: Binding, b: Backward,
               deps: object) -> Iterator[tuple[ast.AST | None, dict[int, ast.AST]]]:
    """(parent node, parent map) of each read of ``t``'s name by the loss of ``b`` and by the
    values of the bindings it depends on (``deps``), at that binding of the name."""
    exprs = [(b.loss, b.stmt.lineno)] + [(value_of(x), x.line) for x in deps.bindings]  # type: ignore[attr-defined]
    for e, line in exprs:
        if e is None:
            continue
        parents = {id(c): p for p in bfs_walk(e) for c in child_nodes(p)}
        for n in bfs_walk(e):
            if isinstance(n, ast.Name) and n.id == t.name \
                    and f.scope.binding_before(t.name, line) is t:
                yield parents.get(id(n)), parents


def _entry_without_graph(f: LoopFacts, fn: ast.AST, key: object) -> bool:
    rets = [s for s in walk(fn) if isinstance(s, ast.Return)]
    if not rets:
        return False
    scope = f.ctx.scope(fn)
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args)} - {"self"}  # type: ignore[attr-defined]
    for r in rets:
        d = r.value
        v = next((v for k, v in zip(d.keys, d.values) if isinstance(k, ast.Constant)
                  and k.value == key), None) if isinstance(d, ast.Dict) else None
        if v is None or not _made_without_model(f, v, scope, params, r.lineno, 0):
            return False
    return True


def _made_without_model(f: LoopFacts, e: ast.AST, scope, params: set[str], line: int,  # type: ignore[no-untyped-def]
                        depth: int) -> bool:
    if depth > 10:
        return False
    ctx = f.ctx
    safe: set[int] = set()  # `self.<attr>` read as an argument of a factory or a move
    for n in walk(e):
        if isinstance(n, ast.Call):
            q = ctx.qualified_name(n.func)
            mover = isinstance(n.func, ast.Attribute) and n.func.attr in MOVES
            if q in FACTORY_FUNCS or mover:
                safe.update(id(x) for a in (*n.args, *(k.value for k in n.keywords))
                            for x in walk(a))
            if isinstance(n.func, ast.Name) and q is None:
                return False  # a local callable or a parameter: a model, perhaps
            if isinstance(n.func, ast.Attribute) and _on_self(n.func.value):
                return False  # `self.gen(x)`, `self.model.encode(h)`
    parents = {id(c): p for p in walk(e) for c in ast.iter_child_nodes(p)}
    for n in walk(e):
        if isinstance(n, ast.Attribute) and _on_self(n) and isinstance(n.value, ast.Name) \
                and id(n) not in safe and (isinstance(parents.get(id(n)), (
                    ast.Attribute, ast.Subscript)) or getattr(parents.get(id(n)), "func", None)
                    is n or not _setting(f, scope.node, n.attr)):
            return False  # (`self.n_fft` read whole: a setting; `self.gen.weight`: not)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id != "self" \
                and not ctx.imports.is_imported(n.id):
            b = scope.binding_before(n.id, line)
            if b is None:
                if n.id not in params:
                    return False
            elif not isinstance(b.stmt, ast.Assign) or not _made_without_model(
                    f, b.stmt.value, scope, params, b.line, depth + 1):
                return False  # (a tuple target: the whole value is read)
    return True


def _setting(f: LoopFacts, fn: ast.AST, attr: str) -> bool:
    """``self.<attr>`` is a setting: the class binds it once, in ``__init__``, to a value
    that calls nothing (a constructor argument, a config entry, a constant)."""
    cls = f.ctx.analysis.class_of(fn)
    info = cls.attrs.get(attr) if cls is not None else None
    v = info.value if info is not None and not info.later else None
    return v is not None and not any(isinstance(x, ast.Call) for x in walk(v))


def _on_self(e: ast.AST) -> bool:
    while isinstance(e, (ast.Attribute, ast.Subscript, ast.Call)):
        e = e.func if isinstance(e, ast.Call) else e.value
    return isinstance(e, ast.Name) and e.id == "self"
