"""State a module carries on ``self`` from one call to the next.
# NOTE [carried state]
``out, self.hidden = self.lstm(x, self.hidden)`` in a method of an ``nn.Module``: the attribute
is given the output of one of the module's own layers (a value on the graph of this call), and
that layer read the attribute's previous value, i.e. the previous call's output. Across calls
the graphs are chained. The same holds when the previous value reaches the stored one
through the method's local names and a layer is on the way (``h = index_select(self.state,
0, i)``; ``h = self.cell(x, h)``; ``self.state = self.aggr(h)``), or when the layer does not
read the attribute itself (``self.h = torch.tanh(self.fc(x) + self.h)``). A module with no
layer of its own carries the graph its input brings (a spiking neuron's ``self.v = v``, ``v``
computed from the previous ``self.v`` and ``forward``'s input, in a class built after a
trained layer, NOTE [input fed by a layer]).
:func:`carried_state` lists such assignments, except where the file cuts the chain itself:
another assignment of the attribute (a reset like
``model.hidden = model.init_hidden()`` in the loop, or ``self.h = (h.detach(), c.detach())``)
anywhere but ``__init__`` and defs the script never reaches (NOTE [unreached defs]: a
``reset()`` only an uncalled ``reset_net`` calls), a ``.detach()``/``.detach_()``/``.data`` of the attribute anywhere,
or a read of it that is detached or made under ``no_grad`` in the statement itself.
A plain class (a trainer holding ``self.model``) carries it the same way through a module it
holds (``logits, state = self.model(x, self.state)``; ``self.state = state``) when the method
runs the backward itself: each call's backward reaches the previous call's freed graph.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.modules import _own_statements
from gradtrace.lint.analysis.steps import step_calls
from gradtrace.lint.nodes import of_types, walk

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context

CUTS = frozenset({"detach", "detach_", "data", "item", "clone_detach"})


@dataclass(frozen=True)
class Carry:
    """``self.<attr>`` assigned, in ``method``, the output of ``layer`` that read it."""

    attr: str
    stmt: ast.Assign
    layer: ast.Call
    method: ast.FunctionDef | ast.AsyncFunctionDef
    direct: bool = True  # the layer reads the attribute itself (else through local names)
    fed: bool = False  # ``layer`` is the trained layer before the module, read by its input


def carried_state(info: ClassInfo, ctx: Context) -> list[Carry]:
    """The assignments of ``info``'s methods that carry a graph into the next call
    (NOTE [carried state]); memoised per class."""
    return ctx.memo("carried-state", info.node, lambda: list(_carried(info, ctx)))


def _carried(info: ClassInfo, ctx: Context):  # type: ignore[no-untyped-def]
    for m in info.methods.values():
        if m.name == "__init__" or not info.is_module and not _steps(m, ctx):
            continue  # a plain class (a trainer holding `self.model`): only a method that
            # runs the backward itself, once per call (NOTE [carried state])
        for s in of_types(m, (ast.Assign,)):
            for attr in _self_targets(s):
                layer = _layer_reading(s.value, attr, info)
                direct = layer is not None
                layer = layer or _through_locals(m, s, attr, info)
                fed = layer is None and _through_input(m, s, attr, info)
                if fed:  # NOTE [input fed by a layer]
                    from gradtrace.lint.analysis.fed_inputs import fed_by_layer
                    layer = fed_by_layer(info, ctx)  # type: ignore[assignment]
                if layer is not None and ctx.scope(m).grad_off_at(s) is None \
                        and not _cut_elsewhere(attr, s, info, ctx):
                    yield Carry(attr, s, layer, m, direct, fed)


def _steps(m: ast.AST, ctx: Context) -> bool:
    return bool(step_calls(ctx, m).backwards)


def _self_targets(s: ast.Assign) -> list[str]:
    out = []
    for t in s.targets:
        for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]):
            if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) \
                    and e.value.id == "self":
                out.append(e.attr)
    return out


def _layer_reading(value: ast.expr, attr: str, info: ClassInfo) -> ast.Call | None:
    """The call of one of the module's layers (``self.<layer>(...)``) whose arguments read
    ``self.<attr>`` as it is (not detached)."""
    for n in walk(value):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and isinstance(n.func.value, ast.Name) and n.func.value.id == "self"):
            continue
        k = info.attr_kind(n.func.attr)
        if k is None or k.what != MODULE:
            continue
        for a in [*n.args, *(kw.value for kw in n.keywords)]:
            if _reads_raw(a, attr):
                return n
    return None


def _through_locals(m: ast.AST, s: ast.Assign, attr: str, info: ClassInfo) -> ast.Call | None:
    """A layer call of the module on the way from the previous ``self.<attr>`` to the value
    ``s`` stores, through the method's local names: ``h = index_select(self.state, 0, i)``,
    ``h = self.cell(x, h)``, ``self.state = self.aggr(h)``; or ``self.h = torch.tanh(
    self.fc(x) + self.h)`` (the layer need not read the attribute itself). None when the
    value does not depend on the previous one, or no layer of the module is on the way."""
    derived: dict[str, ast.Call | None] = {}
    for st in _own_statements(m):
        if st is s:
            break
        if not isinstance(st, ast.Assign) or st.lineno >= s.lineno:
            continue
        names = [e.id for t in st.targets for e in walk(t) if isinstance(e, ast.Name)]
        reads, layer = _depends(st.value, attr, derived, info)
        for n in names:
            if reads:
                derived[n] = layer
            else:
                derived.pop(n, None)
    reads, layer = _depends(s.value, attr, derived, info)
    return layer if reads else None


def _through_input(m: ast.AST, s: ast.Assign, attr: str, info: ClassInfo) -> bool:
    """The value ``s`` stores is computed, through the method's local names, from both the
    previous ``self.<attr>`` and a parameter of the method (its input), with no cut."""
    args = getattr(m, "args", None)
    if args is None:
        return False
    params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)} - {"self"}
    prev: dict[str, ast.Call | None] = {}
    inp: dict[str, ast.Call | None] = {p: None for p in params}
    for st in _own_statements(m):
        if st is s:
            break
        if not isinstance(st, ast.Assign) or st.lineno >= s.lineno:
            continue
        names = [e.id for t in st.targets for e in walk(t) if isinstance(e, ast.Name)]
        reads = _depends(st.value, attr, prev, info)[0]
        fed = _depends(st.value, "", inp, info)[0]
        for n in names:
            for table, hit in ((prev, reads), (inp, fed)):
                if hit:
                    table[n] = None
                else:
                    table.pop(n, None)
    return _depends(s.value, attr, prev, info)[0] and _depends(s.value, "", inp, info)[0]


def _depends(value: ast.expr, attr: str, derived: dict[str, ast.Call | None],
             info: ClassInfo) -> tuple[bool, ast.Call | None]:
    """(whether ``value`` reads ``self.<attr>`` or a name derived from it, not through a cut;
    a layer call of the module in ``value`` or on the way to a derived name it reads)."""
    cut = {id(x) for n in walk(value) if isinstance(n, ast.Attribute) and n.attr in CUTS
           for x in walk(n.value)}  # `(...).detach()`: nothing under it is read
    reads, layer = False, None
    for n in walk(value):
        if id(n) in cut:
            continue
        if isinstance(n, ast.Attribute) and n.attr == attr and isinstance(n.value, ast.Name) \
                and n.value.id == "self" and isinstance(n.ctx, ast.Load):
            reads = True
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in derived:
            reads = True
            layer = layer or derived[n.id]
        elif layer is None and isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and isinstance(n.func.value, ast.Name) and n.func.value.id == "self":
            k = info.attr_kind(n.func.attr)
            if k is not None and k.what == MODULE:
                layer = n
    return reads, layer


def _reads_raw(e: ast.expr, attr: str) -> bool:
    """``e`` is ``self.<attr>`` (or a tuple/subscript of it), not ``self.<attr>.detach()``."""
    if isinstance(e, (ast.Tuple, ast.List)):
        return any(_reads_raw(x, attr) for x in e.elts)
    if isinstance(e, ast.Subscript):
        return _reads_raw(e.value, attr)
    return isinstance(e, ast.Attribute) and e.attr == attr and isinstance(e.value, ast.Name) \
        and e.value.id == "self"


def _cut_elsewhere(attr: str, s: ast.Assign, info: ClassInfo, ctx: Context) -> bool:
    """The file resets or detaches ``<x>.<attr>`` somewhere (one walk of the file, cached)."""
    init = info.methods.get("__init__")
    in_init = {id(n) for n in walk(init)} if init is not None else set()
    lazy = _lazy_inits(attr, info)
    from gradtrace.lint.analysis.unreached import unreached_nodes
    for n in _touches(ctx).get(attr, ()):
        if n is s or id(n) in in_init or id(n) in lazy \
                or id(n) in unreached_nodes(ctx):  # NOTE [unreached defs]
            continue
        return True
    return False


def _lazy_inits(attr: str, info: ClassInfo) -> set[int]:
    """The statements under ``if self.<attr> is None:`` in the class's methods: a first value
    made once, not a reset (EvolveGCN's ``if self.weight is None: ... else: _, self.weight =
    self.gru(self.weight, ...)``)."""
    out: set[int] = set()
    for m in info.methods.values():
        for n in walk(m):
            if isinstance(n, ast.If) and isinstance(n.test, ast.Compare) \
                    and len(n.test.ops) == 1 and isinstance(n.test.ops[0], ast.Is) \
                    and isinstance(n.test.comparators[0], ast.Constant) \
                    and n.test.comparators[0].value is None \
                    and _reads_raw(n.test.left, attr):
                out.update(id(x) for b in n.body for x in walk(b))
    return out


def _touches(ctx: Context) -> dict[str, list[ast.AST]]:
    """``{attr: [nodes]}``: assignments to ``<x>.<attr>`` (statements) and ``<x>.<attr>``
    read through a cut (``.detach()``, ``.detach_()``, ``.data``) anywhere in the file."""
    def make() -> dict[str, list[ast.AST]]:
        out: dict[str, list[ast.AST]] = {}
        for n in walk(ctx.tree):
            if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                for t in targets:
                    for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]):
                        if isinstance(e, ast.Attribute):
                            out.setdefault(e.attr, []).append(n)
            elif isinstance(n, ast.Attribute) and n.attr in CUTS \
                    and isinstance(n.value, ast.Attribute):
                out.setdefault(n.value.attr, []).append(n)
        return out
    return ctx.memo("attribute-touches", ctx.tree, make)


def method_rebinds(ctx: Context, fn: ast.AST, attr: str, after: int, before: int,
                   depth: int = 2) -> ast.Call | None:
    """# NOTE [state set by a called method]
    A call ``self.m(...)`` in ``fn`` on a line in ``(after, before)`` whose method (of the
    class ``fn`` belongs to, or a method that one calls on ``self``, ``depth`` deep) assigns
    ``self.<attr>`` or adds into it a value that is not a constant: after ``self.loss = 0``,
    ``self.rollout(...)`` (``self.loss += ml_loss``) leaves a tensor there, whatever the
    binding in ``fn`` says (R2R-EnvDrop's and VLN-HAMT's agents)."""
    for n in walk(fn):
        if isinstance(n, ast.Call) and after < getattr(n, "lineno", 0) < before:
            m = ctx.analysis.callee(n, fn)
            if m is not None and isinstance(n.func, ast.Attribute) and _writes_attr(
                    ctx, m, attr, depth):
                return n
    return None


def _writes_attr(ctx: Context, m: ast.AST, attr: str, depth: int) -> bool:
    for s in walk(m):
        if isinstance(s, (ast.Assign, ast.AugAssign)) and not isinstance(s.value, ast.Constant):
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            if any(isinstance(t, ast.Attribute) and t.attr == attr
                   and isinstance(t.value, ast.Name) and t.value.id == "self" for t in targets):
                return True
        elif depth > 1 and isinstance(s, ast.Call) and isinstance(s.func, ast.Attribute):
            inner = ctx.analysis.callee(s, m)
            if inner is not None and inner is not m and _writes_attr(ctx, inner, attr, depth - 1):
                return True
    return False
