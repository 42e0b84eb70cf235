"""Lists of block outputs written in place by index (GT602/GT603 through
:func:`._class_writes.class_writes`): ``laterals = [conv(x) for conv, x in zip(self.convs, xs)]``
then ``laterals[i - 1] += up`` writes into one block's output."""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.module_results import basic_index
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import bfs_walk

# methods whose result views a contiguous receiver (a layer's output): writes reach it
KEEP_VIEW = frozenset({"view", "view_as", "reshape", "unsqueeze", "squeeze", "flatten",
                       "unflatten", "narrow", "select"})


def _element_set(s: ast.stmt, name: str) -> bool:
    """``name[j] = ...``: an element replaced (what a later write reaches is not known)."""
    return isinstance(s, ast.Assign) and any(
        isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == name
        for t in s.targets)


def _listed_call(stmt: ast.stmt) -> tuple[str, ast.Call] | None:
    """(the list's name, the module call) for ``outs = [<module call> for ... in ...]``: one
    generator, the element a call of a block the generator takes from a container
    (``for blk, x in zip(self.blocks, xs)``, ``for i, blk in enumerate(self.blocks)``) or of
    ``self.blocks[i]``; the call is given as if made in the loop ``for blk in self.blocks``."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.ListComp)):
        return None
    comp = stmt.value
    call = comp.elt
    if len(comp.generators) != 1 or comp.generators[0].ifs or not isinstance(call, ast.Call):
        return None
    f = call.func
    if isinstance(f, ast.Subscript) and isinstance(f.value, ast.Attribute):
        return stmt.targets[0].id, call
    if not isinstance(f, ast.Name):
        return None
    gen = comp.generators[0]
    t, it = gen.target, gen.iter
    src: ast.expr | None = None
    if isinstance(t, ast.Name) and t.id == f.id:
        src = it
    elif isinstance(t, ast.Tuple) and isinstance(it, ast.Call) and not it.keywords \
            and isinstance(it.func, ast.Name):
        pos = next((j for j, x in enumerate(t.elts)
                    if isinstance(x, ast.Name) and x.id == f.id), None)
        if pos is not None and it.func.id == "zip" and pos < len(it.args):
            src = it.args[pos]
        elif pos == 1 and it.func.id == "enumerate" and len(it.args) == 1:
            src = it.args[0]
    if not (isinstance(src, ast.Attribute) and isinstance(src.value, ast.Name)
            and src.value.id == "self"):
        return None
    elem = ast.Call(func=ast.Subscript(value=src, slice=ast.Constant(0), ctx=ast.Load()),
                    args=call.args, keywords=call.keywords)
    return stmt.targets[0].id, ast.copy_location(elem, call)


def _may_pair(stmts: list[ast.stmt], written: dict[str, list[int]]) -> bool:
    """Whether a method's statements (in order; ``written``: the indices of the in-place
    writes by name) may hold a pair ``_class_writes._class_pairs`` keeps: a list of block outputs
    then an indexed ``+=`` into it, or ``out = <call>`` then a write into ``out``. Shape
    alone (no scope, no module's op): the cheap test before asking whether the method runs
    with the graph (NOTE [trained methods])."""
    if not written:
        return False
    for i, stmt in enumerate(stmts):
        listed = _listed_call(stmt)
        if listed is not None:
            if any(k > i and isinstance(stmts[k], ast.AugAssign)
                   and isinstance(stmts[k].target, ast.Subscript)  # type: ignore[attr-defined]
                   for k in written.get(listed[0], ())):
                return True
            continue
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                and isinstance(stmt.value, ast.Call) \
                and isinstance(stmt.value.func, (ast.Attribute, ast.Subscript, ast.Name)):
            name = dotted(stmt.targets[0])
            if name is not None and any(j > i for j in written.get(name, ())):
                return True
    return False


def unviewed(e: ast.expr) -> ast.expr:
    """``<call>.reshape(n, -1).unsqueeze(1)``: the call whose result the value views."""
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr in KEEP_VIEW and isinstance(e.func.value, ast.Call):
        e = e.func.value
    return e


def view_aliases(stmts: list[ast.stmt], written: dict[str, list[int]]) -> dict[str, str]:
    """``w = out[..., :n]`` / ``w = out.view(b, -1)`` (a view of ``out``, ``w`` bound once):
    alias -> base; each write into ``w`` after its binding is added to ``written[out]``."""
    out: dict[str, str] = {}
    if not written:
        return out
    bound: dict[str, list[int]] = {}  # the names written in place: where they are assigned
    for j, st in enumerate(stmts):
        if isinstance(st, ast.Assign):
            for t in st.targets:  # a name is bound by a target that is one or in a tuple /
                # list / starred target; `self.x = ...`, `x[i] = ...` read the names in them
                for n in (t,) if isinstance(t, ast.Name) else bfs_walk(t) if isinstance(
                        t, (ast.Tuple, ast.List, ast.Starred)) else ():
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) \
                            and n.id in written:
                        bound.setdefault(n.id, []).append(j)
    for a, (j, *more) in bound.items():
        st = stmts[j]
        v = st.value if isinstance(st, ast.Assign) and len(st.targets) == 1 else None
        if more or a not in written or v is None:
            continue
        if isinstance(v, ast.Subscript) and basic_index(v.slice):
            base = v.value
        elif isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
                and v.func.attr in KEEP_VIEW:
            base = v.func.value
        else:
            continue
        if isinstance(base, ast.Name) and base.id != a:
            out[a] = base.id
            written.setdefault(base.id, []).extend(k for k in written[a] if k > j)
    for ks in written.values():
        ks.sort()
    return out
