"""Input leaves whose gradient nothing reads: a derivative that reaches only them is harmless.

# NOTE [unread leaves]
``pos.requires_grad = True`` (the attribute form: PyTorch raises "you can only change
requires_grad flags of leaf variables" on a value with history) proves ``pos`` a leaf, so no
graph comes into the function through it. When ``pos`` is bound once, never returned, and
nothing in the file reads its gradient (no ``pos.grad``, no ``register_hook``, no
``autograd.grad``/``torch.func`` transform, no ``backward(inputs=...)``), what backward
writes into ``pos.grad`` is never used: an inf/NaN derivative of an op whose operand comes
only from ``pos`` (MoleculeSDE's ``sqrt(1 - cos ** 2)`` of the noised positions) changes no
parameter. A numerics rule asks :func:`trace_without_unread_leaves` whether its operand still
carries a graph with those leaves counted as data; the other rules are not asked (an in-place
op on such a leaf still raises).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.cuts import DEAD, Trace
from gradtrace.lint.analysis.cuts import top_defs
from gradtrace.lint.analysis.origins import Tracer, helper_is_pure
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Binding, Scope

# calls that read the gradient of an input (reverse mode, functional transforms)
GRAD_READERS = frozenset({"grad", "vjp", "jvp", "jacobian", "hessian", "jacrev", "jacfwd",
                          "hvp", "vhp", "grad_and_value", "register_hook"})


def _reads_input_gradients(ctx: Context) -> bool:
    """The file asks for some input's gradient: ``autograd.grad``, a ``torch.func``
    transform, a hook on a tensor, ``backward(inputs=...)``."""
    def scan() -> bool:
        for n in walk(ctx.tree):
            if isinstance(n, ast.Call):
                f = n.func
                last = f.attr if isinstance(f, ast.Attribute) else \
                    f.id if isinstance(f, ast.Name) else ""
                if last in GRAD_READERS or last == "backward" and any(
                        k.arg == "inputs" for k in n.keywords):
                    return True
        return False
    return ctx.memo("unread-leaves-grad-readers", ctx.tree, scan)


def _grad_read_names(ctx: Context) -> frozenset[str]:
    """The last names of every ``x.grad`` read in the file (``pos``, ``data.positions``)."""
    def scan() -> frozenset[str]:
        out = set()
        for n in walk(ctx.tree):
            if isinstance(n, ast.Attribute) and n.attr == "grad":
                d = dotted(n.value)
                if d is not None:
                    out.add(d.rpartition(".")[2])
        return frozenset(out)
    return ctx.memo("unread-leaves-grad-names", ctx.tree, scan)


def _foreign_gradient_reader(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Another file of the project names ``fn``'s class (or ``fn``) and asks for an input
    gradient (``autograd``, ``torch.func``, ``functorch``): a force-field trainer taking
    ``-autograd.grad(energy, data.pos)`` of the model. Unknown (no project): no."""
    from gradtrace.lint.analysis.callers import readers
    cls = ctx.analysis.class_of(fn)
    name = (cls.name if cls is not None else fn.name).encode()
    return any(readers(ctx, name, w) for w in (b"autograd", b"torch.func", b"functorch"))


def unread_leaves(ctx: Context, fn: ast.AST) -> frozenset[str]:
    """The names of ``fn`` that are proven leaves whose gradient nothing reads
    (NOTE [unread leaves])."""
    def make() -> frozenset[str]:
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return frozenset()
        flagged = [t.value.id for s in walk(fn) if isinstance(s, ast.Assign)
                   and isinstance(s.value, ast.Constant) and s.value.value is True
                   for t in s.targets if isinstance(t, ast.Attribute)
                   and t.attr == "requires_grad" and isinstance(t.value, ast.Name)]
        if not flagged or _reads_input_gradients(ctx) or _foreign_gradient_reader(ctx, fn):
            return frozenset()
        scope = ctx.scope(fn)
        read = _grad_read_names(ctx)
        returned = {n.id for r in walk(fn) if isinstance(r, (ast.Return, ast.Yield))
                    and r.value is not None for n in walk(r.value) if isinstance(n, ast.Name)}
        out = set()
        for name in flagged:
            bs: list[Binding] = scope.bindings.get(name, [])
            source = dotted(bs[0].value) if len(bs) == 1 and bs[0].value is not None else None
            if len(bs) > 1 or name in read or name in returned \
                    or source is not None and source.rpartition(".")[2] in read:
                continue
            out.add(name)
        return frozenset(out)
    return ctx.memo("unread-leaves", fn, make)


class _LeafTracer(Tracer):
    """The function's tracer with its unread leaves counted as data."""

    def __init__(self, scope: Scope, ctx: Context, leaves: frozenset[str]) -> None:
        super().__init__(scope, ctx)
        self.leaves = leaves

    def _name(self, name: str, use: ast.stmt | None, line: int) -> Trace:
        if name in self.leaves:
            return DEAD
        return super()._name(name, use, line)

    def _call(self, e: ast.Call, use: ast.stmt | None, line: int) -> Trace:
        """A pure helper of the file (``coord2basis(pos, row, col)``): an argument its body
        reads only as an index (``pos[row]``) gives the result no gradient (indexing is not
        differentiable in the index), so only the others are traced."""
        fn = top_defs(self.ctx).get(e.func.id) if isinstance(e.func, ast.Name) else None
        if fn is None or e.keywords or any(isinstance(a, ast.Starred) for a in e.args) \
                or not helper_is_pure(self.ctx, e.func.id):  # type: ignore[union-attr]
            return super()._call(e, use, line)
        names = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
        index_only = _index_only(fn)
        return self._all([a for i, a in enumerate(e.args)
                          if i >= len(names) or names[i] not in index_only], use, line)

    def _attribute(self, e: ast.Attribute, use: ast.stmt | None, line: int) -> Trace:
        if isinstance(e.value, ast.Name) and e.value.id == "self" \
                and e.attr in _gradless_attrs(self.ctx, self.scope.node):
            return DEAD
        return super()._attribute(e, use, line)

    def _method(self, e: ast.Call, func: ast.Attribute, use: ast.stmt | None,
                line: int) -> Trace:
        """``self.sde.marginal_prob(pos, t)`` with ``self.sde`` a plain helper object
        (:func:`plain_object`): its result comes from the call's arguments only."""
        v = func.value
        if isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name) \
                and v.value.id == "self" and plain_object(self.ctx, self.scope.node, v.attr,
                                                          func.attr):
            return self.args_trace(e, use, line)
        return super()._method(e, func, use, line)


PLAIN_BASES = frozenset({"object", "abc.ABC", "ABC"})


def plain_object(ctx: Context, fn: ast.AST, attr: str, method: str) -> bool:
    """Every value the class around ``fn`` assigns to ``self.<attr>`` builds a class of the
    project (NOTE [project index]) that is no ``nn.Module``, whose bases are ``object``,
    ``abc.ABC`` or classes of its file, whose constructor is given no ``self`` attribute nor a
    call's result, and that makes nothing trainable (no ``nn.Parameter``, no
    ``requires_grad``); its ``method`` calls nothing on ``self`` but the class's own methods:
    MoleculeSDE's ``VESDE`` (numbers and a schedule), whose ``marginal_prob(x, t)`` is a
    function of ``x`` and ``t``. Anything else (a wrapper holding a model) may add a graph."""
    from gradtrace.lint.analysis.built_classes import built_class
    from gradtrace.lint.analysis.cuts import self_assignments
    owner = ctx.analysis.class_of(fn)
    values = self_assignments(owner.node if owner else None, "self." + attr, ctx)
    if not values:
        return False
    for v in values:
        if not isinstance(v, ast.Call) or any(
                isinstance(n, ast.Call) or isinstance(n, ast.Name) and n.id == "self"
                for a in (*v.args, *(k.value for k in v.keywords)) for n in walk(a)):
            return False
        got = built_class(ctx, v)
        if got is None:
            return False
        octx, cls = got
        line = list(cls.lineage())
        body = cls.method(method)
        if body is None or any(c.is_module for c in line) or any(
                (dotted(b) or "") not in PLAIN_BASES and not (
                    isinstance(b, ast.Name) and b.id in octx.analysis.classes)
                for c in line for b in c.node.bases) or any(
                _trainable(n) for c in line for n in walk(c.node)):
            return False
        own = {m for c in line for m in c.methods}
        for n in walk(body):
            if isinstance(n, ast.Call):
                root = n.func
                while isinstance(root, ast.Attribute):
                    root = root.value
                if isinstance(root, ast.Name) and root.id == "self" and not (
                        isinstance(n.func, ast.Attribute) and n.func.value is root
                        and n.func.attr in own):
                    return False
    return True


def _gradless_attrs(ctx: Context, fn: ast.AST) -> frozenset[str]:
    """Attributes of the class around ``fn`` that never get a gradient: each assignment is
    ``nn.Parameter(..., requires_grad=False)``, or the class passes ``self.<attr>`` as a
    bound of ``torch.randint`` or ``range`` (both raise TypeError on a float tensor, and an
    integer tensor has no gradient): MoleculeSDE's ``self.num_diffusion_timesteps``."""
    from gradtrace.lint.analysis.cuts import self_assignments
    owner = ctx.analysis.class_of(fn)
    if owner is None:
        return frozenset()

    def make() -> frozenset[str]:
        out = set()
        for n in walk(owner.node):
            if isinstance(n, ast.Call) and (ctx.qualified_name(n.func) or "") in (
                    "torch.randint", "range"):
                for a in (*n.args[:2], *(k.value for k in n.keywords
                                         if k.arg in ("low", "high"))):
                    d = dotted(a) if isinstance(a, ast.Attribute) else None
                    if d is not None and d.startswith("self.") and d.count(".") == 1:
                        out.add(d[5:])
        for name in owner.attrs:
            values = self_assignments(owner.node, "self." + name, ctx)
            if values and all(isinstance(v, ast.Call) and (ctx.qualified_name(v.func) or "")
                              .endswith("nn.Parameter") and any(
                                  k.arg == "requires_grad" and isinstance(k.value, ast.Constant)
                                  and k.value.value is False for k in v.keywords)
                              for v in values):
                out.add(name)
        return frozenset(out)
    return ctx.memo("unread-leaves-gradless-attrs", owner.node, make)


def _trainable(n: ast.AST) -> bool:
    """``nn.Parameter(...)``, ``requires_grad=True``, ``x.requires_grad_()``."""
    if isinstance(n, ast.keyword):
        return n.arg == "requires_grad"
    if isinstance(n, ast.Attribute):
        return n.attr in ("requires_grad_", "requires_grad", "Parameter")
    return isinstance(n, ast.Name) and n.id == "Parameter"


def _index_only(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
    """The arguments of ``fn`` read only as the index of a subscript, never rebound."""
    slices = {id(n) for s in walk(fn) if isinstance(s, ast.Subscript)
              for n in ([s.slice] if not isinstance(s.slice, ast.Tuple) else s.slice.elts)}
    out = set()
    for a in (*fn.args.posonlyargs, *fn.args.args):
        uses = [n for n in walk(fn) if isinstance(n, ast.Name) and n.id == a.arg]
        if uses and all(isinstance(n.ctx, ast.Load) and id(n) in slices for n in uses):
            out.add(a.arg)
    return frozenset(out)


def trace_without_unread_leaves(ctx: Context, fn: ast.AST, operand: ast.expr,
                                line: int) -> Trace | None:
    """``operand``'s trace with ``fn``'s unread leaves dead; None when ``fn`` has none."""
    leaves = unread_leaves(ctx, fn)
    if not leaves:
        return None
    tracer = ctx.memo("origins-unread-leaves", fn,
                      lambda: _LeafTracer(ctx.scope(fn), ctx, leaves))
    return tracer.trace(operand, ctx.statement, line)
