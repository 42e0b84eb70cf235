"""Views that autograd refuses to see written in place: the outputs of a function that returns
several views of one tensor.

# NOTE [multi-output views]
``split``, ``chunk``, ``unbind`` and ``split_with_sizes`` (method or ``torch.<op>``), and
iterating a tensor (``for row in t``: one ``unbind``), return views of their input. When that
input carries a graph and grad is enabled, an in-place write into one of those views, or into
a view of one (``q.view(...)``, ``q.permute(...)``, ``q[0]``), raises at the write:
``RuntimeError: Output 0 of SplitBackward0 is a view and is being modified inplace. This view
is the output of a function that returns multiple views. Such functions do not allow the
output views to be modified inplace.`` Checked on torch 2.13 for each op of
:data:`MULTI_VIEW_OPS` (also ``chunk(1)``, ``split`` into one piece, the elements of the
tuple kept whole: ``parts = t.split(3); parts[0].mul_(2)``), and the look-alikes that do
not raise: ``tensor_split``/``hsplit``/``unflatten`` (made of slices), the same writes under
``no_grad``, a split of a tensor without history or of ``t.detach()``, a piece copied first
(``.clone()``, ``.contiguous()``, an out-of-place ``q = q * c``), and a write into the split
tensor itself. ``reshape``/``flatten`` (method or ``torch.<op>``) give a view whenever the
strides allow one, and then the write raises the same way (checked on torch 2.13: splitting a
piece's dimension into heads, ``q.reshape(b, n, h, d)``, is always a view): they are
followed, like a view, unless they make one dimension (``t.reshape(-1)``, ``t.flatten()``:
a piece of a last-dimension split then copies; UDIS's ``t_s.reshape(-1)`` of a chunk along
dim 1 is a view only when the batch is 1, and is left alone). A helper of the file whose
every ``return`` is such a view of one of its parameters (``def split_heads(x, n): return
x.reshape(...)``) gives a view of the argument its call passes.

Which tensors carry a graph is read here without running anything: the result of a module
call (an ``nn.Module`` the kinds know, NOTE [kinds]), a view or an op of a tensor method on
such a result, through the names it is bound to in the same function; a function's parameter
when a call of it passes a tensor that surely requires grad (NOTE [values that require grad]).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.grad_values import passed_requiring
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.names import dotted

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

MULTI_VIEW_OPS = frozenset({"split", "chunk", "unbind", "split_with_sizes"})
# tensor methods whose result is always a view of the receiver (a write into it writes the
# receiver); reshape/flatten/contiguous may copy and are not listed (reshapes: RESHAPES)
VIEW_OF = frozenset({"view", "view_as", "permute", "transpose", "t", "unsqueeze", "squeeze",
                     "narrow", "select", "expand", "expand_as", "movedim", "swapaxes",
                     "diagonal", "unfold", "T", "mT"})
# tensor methods whose result carries the receiver's graph (a new tensor, or a view)
SAME_GRAPH = VIEW_OF | {"reshape", "flatten", "contiguous", "clone", "float", "double", "half",
                        "to", "type_as", "mul", "add", "sub", "div", "matmul", "softmax",
                        "log_softmax", "sigmoid", "tanh", "relu", "exp", "sum", "mean"}
# may-views: a view whenever the strides allow one (a head split always)
RESHAPES = frozenset({"reshape", "flatten"})
# torch functions whose result carries the graph of their tensor arguments
GRAPH_FUNCS = frozenset({"bmm", "mm", "matmul", "mul", "add", "sub", "div", "cat", "stack",
                         "exp", "log", "sigmoid", "tanh", "softmax", "relu", "reshape",
                         "flatten", "transpose", "permute", "einsum"})
MAX_DEPTH = 8
GRAPH, TENSOR_GRAPH = 1, 2  # carries a graph; carries a graph and is surely one tensor


def _basic_index(s: ast.Subscript, names: bool = True) -> bool:
    """``t[i]``, ``t[:, -1]``, ``t[..., 0]``: an index made of numbers, slices (and, with
    ``names``, names: a mask or an index tensor copies, an int gives a view)."""
    parts = s.slice.elts if isinstance(s.slice, ast.Tuple) else [s.slice]
    kinds = (ast.Slice, ast.Constant, ast.Name) if names else (ast.Slice, ast.Constant)
    return all(isinstance(p, kinds) or (
        isinstance(p, ast.UnaryOp) and isinstance(p.operand, ast.Constant)) for p in parts)


def _sure_tensor_index(s: ast.Subscript) -> bool:
    """An index a list or a tuple would refuse: several positions, or an Ellipsis/None."""
    parts = s.slice.elts if isinstance(s.slice, ast.Tuple) else [s.slice]
    return len(parts) > 1 or any(isinstance(p, ast.Constant) and p.value in (None, Ellipsis)
                                 for p in parts)


class MultiViews:
    """What the names of one function hold, read lazily (NOTE [multi-output views])."""

    def __init__(self, fn: ast.AST, ctx: Context) -> None:
        self.fn, self.ctx = fn, ctx
        self.scope: Scope = ctx.scope(fn)

    # -- graphs ------------------------------------------------------------------------------
    def graph(self, e: ast.AST, line: int, depth: int = 0) -> int:
        """:data:`TENSOR_GRAPH`, :data:`GRAPH` or 0 (not known to carry a graph)."""
        if depth > MAX_DEPTH:
            return 0
        if isinstance(e, ast.Name):
            b = self.scope.binding_before(e.id, line)
            if b is None and self._passed_requiring(e.id):
                return TENSOR_GRAPH
            if b is None or not isinstance(b.stmt, ast.Assign) or b.value is None \
                    or not isinstance(b.stmt.targets[0], ast.Name) or len(b.stmt.targets) > 1:
                return 0
            return self.graph(b.value, b.line, depth + 1)
        if isinstance(e, ast.Subscript):
            if not _basic_index(e):
                return 0
            g = self.graph(e.value, line, depth + 1)
            return TENSOR_GRAPH if g == TENSOR_GRAPH or g and _sure_tensor_index(e) else 0
        if not isinstance(e, ast.Call):
            return 0
        f = e.func
        if isinstance(f, ast.Attribute) and f.attr in SAME_GRAPH \
                and not (self.ctx.qualified_name(f) or "").startswith("torch."):
            return TENSOR_GRAPH if self.graph(f.value, line, depth + 1) else 0
        if isinstance(f, (ast.Name, ast.Attribute)) and self._module_call(e, line):
            return GRAPH
        q = self.ctx.qualified_name(f) or ""
        if q.startswith("torch.") and q[6:] in GRAPH_FUNCS:  # `torch.bmm(h, grid)`
            args = [x for a in e.args for x in (
                a.elts if isinstance(a, (ast.List, ast.Tuple)) else [a])]
            return TENSOR_GRAPH if any(self.graph(a, line, depth + 1) for a in args) else 0
        return 0

    def _passed_requiring(self, name: str) -> bool:
        """``name`` is a parameter of the function that a call of it passes a tensor that
        requires grad, with grad enabled (NOTE [values that require grad])."""
        fn = self.fn
        a = getattr(fn, "args", None)
        if a is None or not any(x.arg == name for x in (*a.posonlyargs, *a.args)):
            return False
        return self.ctx.memo("multi-views-passed:" + name, fn,
                             lambda: passed_requiring(self.ctx, fn, name) is not None)

    def _module_call(self, call: ast.Call, line: int) -> bool:
        """``self.proj(x)``, ``model(x)``: running an ``nn.Module`` instance (not building
        one)."""
        k = self.ctx.analysis.kind(call.func, self.scope, line)
        if k is None or k.what != MODULE:
            return False
        name = dotted(call.func)
        b = self.scope.binding_before(name, line) if name else None
        return not (b is not None and isinstance(b.stmt, ast.ClassDef)) \
            and (self.ctx.qualified_name(call.func) or "").partition(".")[0] != "torch"

    # -- multi-output views ------------------------------------------------------------------
    def split_of(self, e: ast.AST, line: int) -> ast.Call | None:
        """The ``split``/``chunk``/``unbind`` call ``e`` is, when it splits a tensor that
        carries a graph."""
        if not isinstance(e, ast.Call):
            return None
        f = e.func
        q = self.ctx.qualified_name(f) or ""
        if q.startswith("torch.") and q[6:] in MULTI_VIEW_OPS and e.args:
            src = e.args[0]
        elif isinstance(f, ast.Attribute) and f.attr in MULTI_VIEW_OPS \
                and not q.startswith("torch."):
            src = f.value
        else:
            return None
        return e if self.graph(src, line) else None

    def view_of_split(self, e: ast.AST, line: int, depth: int = 0) -> ast.AST | None:
        """Where the multi-output view ``e`` was made (a split call, or the ``for`` that
        iterates a tensor), or None."""
        if depth > MAX_DEPTH:
            return None
        while True:
            if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
                    and e.func.attr in VIEW_OF | RESHAPES \
                    and not (self.ctx.qualified_name(e.func) or "").startswith("torch.") \
                    and not _flat(e, 0):
                e = e.func.value
            elif isinstance(e, ast.Call) and e.args and (self.ctx.qualified_name(
                    e.func) or "") in ("torch.reshape", "torch.flatten") and not _flat(e, 1):
                e = e.args[0]  # `torch.reshape(q, (b, h, d))`
            elif isinstance(e, ast.Call) and (arg := self._helper_view(e)) is not None:
                e = arg  # `q = self.split_heads(q, n)`: a helper returning a view of `q`
            elif isinstance(e, ast.Attribute) and e.attr in ("T", "mT"):
                e = e.value
            elif isinstance(e, ast.Subscript) and _basic_index(e):
                if self.split_of(e.value, line) is not None:
                    return e.value  # `x.chunk(2)[0]`
                whole = self._split_list(e.value, line) \
                    if isinstance(e.value, ast.Name) else None
                if whole is not None:
                    return whole  # `parts = x.split(3)`, then `parts[i]`
                if not _basic_index(e, names=False):
                    return None  # `q[mask]` copies
                e = e.value
            else:
                break
        if not isinstance(e, ast.Name):
            return None
        b = self.scope.binding_before(e.id, line)
        if b is None:
            return None
        s = b.stmt
        if isinstance(s, ast.Assign) and len(s.targets) == 1:
            t = s.targets[0]
            if isinstance(t, ast.Name):
                return self.view_of_split(s.value, b.line, depth + 1)
            if isinstance(t, (ast.Tuple, ast.List)) and any(
                    isinstance(x, ast.Name) and x.id == e.id for x in t.elts):
                src = self._mapped(s.value, t, e.id)
                if src is not None:  # `q, k, v = map(lambda t: to_heads(t, h), (q, k, v))`
                    return self.view_of_split(src, b.line, depth + 1)
                return self.split_of(s.value, b.line)
            return None
        if isinstance(s, ast.For) and self.scope.grad_off_at(s) is None:
            return self._iterated(s, e.id)
        return None

    def _mapped(self, value: ast.expr, target: ast.Tuple | ast.List, name: str
                ) -> ast.expr | None:
        """The element of ``map(f, (a, b, c))`` unpacked into ``name`` when ``f`` returns a
        view of its argument: a lambda whose body is a view of its one parameter (through
        view methods and helpers of :meth:`_helper_view`), or such a helper of the file."""
        if not (isinstance(value, ast.Call) and dotted(value.func) == "map"
                and len(value.args) == 2 and not value.keywords
                and isinstance(value.args[1], (ast.Tuple, ast.List))):
            return None
        elts = value.args[1].elts
        if len(elts) != len(target.elts):
            return None
        f = value.args[0]
        if isinstance(f, ast.Lambda):
            a = f.args
            if len(a.args) != 1 or a.posonlyargs or a.kwonlyargs or a.vararg or a.kwarg:
                return None
            e: ast.AST = f.body
            while isinstance(e, ast.Call):
                nxt = e.func.value if isinstance(e.func, ast.Attribute) \
                    and e.func.attr in VIEW_OF | RESHAPES and not _flat(e, 0) \
                    and not (self.ctx.qualified_name(e.func) or "").startswith("torch.") \
                    else self._helper_view(e)
                if nxt is None:
                    break
                e = nxt
            if not (isinstance(e, ast.Name) and e.id == a.args[0].arg):
                return None
        else:
            fn = self.ctx.analysis.callee(ast.Call(func=f, args=[elts[0]], keywords=[]),
                                          self.fn) if isinstance(f, ast.Name) else None
            params = [x.arg for x in (*fn.args.posonlyargs, *fn.args.args)] if fn else []
            if not params or self.ctx.memo("multi-views-helper", fn, lambda: _viewed_param(
                    fn, self.ctx)) != params[0]:
                return None
        return next((v for x, v in zip(target.elts, elts)
                     if isinstance(x, ast.Name) and x.id == name), None)

    def _helper_view(self, call: ast.Call) -> ast.expr | None:
        """The argument of ``call`` that the result is a view of: ``call`` runs a function of
        the file whose every ``return`` is a view (:data:`VIEW_OF`, :data:`RESHAPES`, a basic
        index) of one parameter, never rebound in it."""
        fn = self.ctx.analysis.callee(call, self.fn)
        if fn is None or fn is self.fn:
            return None
        param = self.ctx.memo("multi-views-helper", fn, lambda: _viewed_param(fn, self.ctx))
        return self.ctx.analysis.arguments(fn, call).get(param) if param else None

    def _split_list(self, name: ast.Name, line: int) -> ast.Call | None:
        """``parts`` bound whole to a split: ``parts = t.split(3)``."""
        b = self.scope.binding_before(name.id, line)
        if b is None or not isinstance(b.stmt, ast.Assign) or b.value is None \
                or not isinstance(b.stmt.targets[0], ast.Name):
            return None
        return self.split_of(b.value, b.line)

    def _iterated(self, loop: ast.For, name: str) -> ast.AST | None:
        """The loop, when ``name`` is a row of a tensor that carries a graph: ``for name in
        t`` or ``for name, m in zip(t, ...)``."""
        t, it = loop.target, loop.iter
        if isinstance(t, ast.Name) and t.id == name:
            src: ast.AST | None = it
        elif isinstance(t, ast.Tuple) and isinstance(it, ast.Call) \
                and dotted(it.func) == "zip" and len(it.args) == len(t.elts) \
                and not it.keywords:
            src = next((a for x, a in zip(t.elts, it.args)
                        if isinstance(x, ast.Name) and x.id == name), None)
        else:
            src = None
        if src is None or self.graph(src, loop.lineno) != TENSOR_GRAPH:
            return None
        return loop


def _flat(call: ast.Call, skip: int) -> bool:
    """A reshape into one dimension (``t.reshape(-1)``, ``t.flatten()``, ``torch.flatten(t)``,
    ``start_dim=0``): it merges the split dimension with the others and copies a piece that is
    not contiguous (a piece of a last-dimension split), so it is not followed; ``skip``: the
    tensor argument of the ``torch.<op>`` form. A ``view``'s shape is not asked (a ``view``
    that cannot share the storage raises)."""
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else ""
    args = call.args[skip:]
    if name == "flatten":
        start = args[0] if args else next(
            (k.value for k in call.keywords if k.arg == "start_dim"), None)
        return start is None or isinstance(start, ast.Constant) and start.value == 0
    if name != "reshape":
        return False
    shape = args[0].elts if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)) \
        else args
    return len(shape) == 1


def _viewed_param(fn: ast.AST, ctx: Context) -> str | None:
    """The parameter every ``return`` of ``fn`` is a view of (see :meth:`MultiViews.
    _helper_view`), or None."""
    a = fn.args  # type: ignore[attr-defined]
    params = {x.arg for x in (*a.posonlyargs, *a.args)}
    found: set[str] = set()
    for n in ast.walk(fn):
        if isinstance(n, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)) and n is not fn:
            return None
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id in params:
            return None  # rebound: the returned name may hold something else
        if isinstance(n, ast.Return):
            e = n.value
            while True:
                if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
                        and e.func.attr in VIEW_OF | RESHAPES \
                        and not (ctx.qualified_name(e.func) or "").startswith("torch.") \
                        and not _flat(e, 0):
                    e = e.func.value
                elif isinstance(e, ast.Call) and e.args and (ctx.qualified_name(
                        e.func) or "") in ("torch.reshape", "torch.flatten") and not _flat(e, 1):
                    e = e.args[0]
                elif isinstance(e, ast.Subscript) and _basic_index(e, names=False):
                    e = e.value
                else:
                    break
            if not (isinstance(e, ast.Name) and e.id in params and e.id not in ("self", "cls")):
                return None
            found.add(e.id)
    return found.pop() if len(found) == 1 else None


def _rows_shape(e: ast.AST) -> bool:
    """Whether :meth:`MultiViews.graph` may say :data:`TENSOR_GRAPH` of ``e`` by its shape
    alone: a name, a subscript, or a tensor method of :data:`SAME_GRAPH` (a module call, a
    ``range(...)``, an attribute ``self.layers`` is at most :data:`GRAPH`)."""
    return isinstance(e, (ast.Name, ast.Subscript)) or isinstance(e, ast.Call) \
        and isinstance(e.func, ast.Attribute) and e.func.attr in SAME_GRAPH


def may_iterate_rows(loop: ast.AST) -> bool:
    """Whether ``loop`` may be one :meth:`MultiViews._iterated` finds (a ``for`` over the rows
    of a tensor that carries a graph), by its shape alone, before any data flow: ``for row
    in t`` / ``for a, b in zip(t, u)`` with ``t`` of :func:`_rows_shape`; ``for i in
    range(n)``, ``for layer in self.layers``, ``for i, x in enumerate(t)`` are not."""
    if not isinstance(loop, ast.For):
        return False
    t, it = loop.target, loop.iter
    if isinstance(t, ast.Name):
        return _rows_shape(it)
    return isinstance(t, ast.Tuple) and isinstance(it, ast.Call) \
        and dotted(it.func) == "zip" and len(it.args) == len(t.elts) and not it.keywords \
        and any(isinstance(x, ast.Name) and _rows_shape(a) for x, a in zip(t.elts, it.args))
