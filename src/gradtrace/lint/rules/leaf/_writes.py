"""In-place writes: the statements that change a tensor in place, and those of ``forward``
that write into a Parameter its module's ``__init__`` registered (GT302)."""
from __future__ import annotations

import ast
import functools
import re
from typing import Iterator, NamedTuple

from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.analysis.grad_values import runs_with_grad
from gradtrace.lint.analysis.kinds import MODULE, PARAMETER
from gradtrace.lint.analysis.layer_params import VIEWS
from gradtrace.lint.analysis.same_object import gives_back
from gradtrace.lint.analysis.param_attrs import (
    asks_no_grad, file_freezes, forward_methods, trained_parameter,
)
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.leaf._passed import passed_parameter
from gradtrace.lint.rules.leaf._tensors import NOT_UPDATES, node_mentions


class Write(NamedTuple):
    stmt: ast.stmt
    what: str          # "update", "slice assignment", "`.clamp_()`"
    name: str          # ``self.weight``
    view: str          # "view of a " for a slice assignment
    origin: ast.stmt   # where the Parameter is made
    note: str = ""     # the related line's note (default: a Parameter is passed here)


def forward_parameter_writes(ctx: Context, node: ast.ClassDef) -> Iterator[Write]:
    """In-place writes, with grad enabled, by ``forward`` (and the methods it calls) of the
    module class ``node`` into ``self.<p>``, a Parameter ``__init__`` made that requires grad
    for good (NOTE [trained parameter attributes])."""
    if not call_sites(ctx, "backward"):
        return  # a file that never trains (cheap: its identifier index)
    cls = ctx.analysis.classes.get(node.name)
    if cls is None or cls.node is not node or not cls.is_module:
        return
    for m in forward_methods(cls):
        for stmt in own_statements(m.body):
            for target, what in in_place_writes(stmt):
                t = target.value if isinstance(target, ast.Subscript) else target
                if not (isinstance(t, ast.Attribute) and dotted(t.value) == "self") or \
                        ctx.scope(m).grad_off_at(stmt) is not None:
                    continue
                origin = trained_parameter(ctx, cls, t.attr)
                if origin is not None:
                    yield Write(stmt, what, f"self.{t.attr}",
                                "view of a " if t is not target else "", origin)


DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def instance_parameter_writes(ctx: Context) -> Iterator[Write]:
    """In-place writes, with grad enabled, into a Parameter that a module class of the file
    registers in ``__init__``, reached through an instance of that class (``model.P[u] =
    row``, ``self.net.P.add_(d)``, ``self.P[u] = row`` in a method other than ``forward``),
    by a function that every call the file makes runs with grad enabled (or by the module
    body): autograd refuses the write whether or not anything calls ``backward()``
    (NOTE [trained parameter attributes]; ``forward`` itself is
    :func:`forward_parameter_writes`'s). A file that freezes anything is skipped."""
    if not ctx.mentions("Parameter"):
        return
    names = {a for c in ctx.analysis.classes.values() if c.is_module  # `__init__` makes it
             and "__init__" in c.methods  # spelling `Parameter` in its code (no reading
             and node_mentions(ctx, c.methods["__init__"], "Parameter")  # of it without)
             for a, i in c.init_attrs.items()  # with a Parameter
             if isinstance(i.value, ast.Call)  # class (its kind is asked when written)
             and (dotted(i.value.func) or "").endswith("Parameter")
             and (ctx.call_name(i.value) or "").endswith("Parameter")}
    if not names:
        return
    written = _write_line(frozenset(names))
    if not written.search(ctx.text) or file_freezes(ctx):  # the cheap test first
        return
    fns: list[ast.AST] = [ctx.tree, *ctx.analysis.functions.values()]
    fns += [m for c in ctx.analysis.classes.values() for m in c.methods.values()]
    for fn in fns:
        if fn is not ctx.tree and not any(written.search(line) for line in ctx.code_lines[
                fn.lineno - 1:fn.end_lineno]):  # type: ignore[attr-defined]
            continue
        for stmt in own_statements(fn.body):  # type: ignore[attr-defined]
            if not isinstance(stmt, (ast.AugAssign, ast.Assign, ast.Expr)):
                continue
            for target, what in in_place_writes(stmt):
                if _written_attr(target) not in names:
                    continue
                got = _instance_parameter(ctx, fn, target, stmt.lineno)
                if got is None or ctx.scope(fn).grad_off_at(stmt) is not None \
                        or not runs_with_grad(ctx, fn):
                    continue
                name, view, origin, cls = got
                yield Write(stmt, what, name, view, origin,
                            f"`{name}` is registered as a Parameter of `{cls}` here")


@functools.lru_cache(maxsize=256)
def _write_line(names: frozenset[str]) -> re.Pattern[str]:
    """A line that may write one of ``names`` in place (word gate: statements are walked only
    in a function holding one)."""
    return re.compile(r"\.(?:%s)\b.*(?:\]\s*=[^=]|_\(|[-+*/]=)" % "|".join(
        sorted(map(re.escape, names))))


def _written_attr(e: ast.expr) -> str | None:
    """``p`` of ``x.p``, ``x.p[i]``, ``x.p.view(...)[i]`` (None: not an attribute)."""
    while isinstance(e, ast.Subscript) or isinstance(e, ast.Call) and isinstance(
            e.func, ast.Attribute) and e.func.attr in VIEWS:
        e = e.value if isinstance(e, ast.Subscript) else e.func.value  # type: ignore[union-attr]
    return e.attr if isinstance(e, ast.Attribute) else None


def _instance_parameter(ctx: Context, fn: ast.AST, e: ast.expr, line: int
                        ) -> tuple[str, str, ast.stmt, str] | None:
    """(name, view, registering statement, class) when ``e`` is, or views, ``x.<p>`` where
    ``x`` is an instance of a module class of the file whose ``__init__`` registers ``p`` as
    a Parameter that requires grad."""
    view = ""
    while True:
        if isinstance(e, ast.Subscript):
            e, view = e.value, "view of a "
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
                and e.func.attr in VIEWS:
            e, view = e.func.value, "view of a "
        else:
            break
    if not isinstance(e, ast.Attribute):
        return None
    k = ctx.analysis.kind_in(e.value, fn, line)
    cls = ctx.analysis.classes.get(k.cls or "") if k is not None and k.what == MODULE else None
    if cls is None or not cls.is_module or (dotted(e.value) == "self" and any(
            fn is m for m in forward_methods(cls))):
        return None
    owner = next((c for c in cls.lineage() if e.attr in c.attrs), cls)  # nearest class
    info = owner.attrs.get(e.attr)
    if info is None or info.later or info.buffer or info.method.name != "__init__":
        return None
    pk = owner.attr_kind(e.attr)
    if pk is None or pk.what != PARAMETER or asks_no_grad(info.value):
        return None
    return ctx.source(e), view, info.stmt, owner.name


def passed_parameter_writes(ctx: Context) -> Iterator[Write]:
    """In-place writes, with grad enabled, by a top-level function of the file into one of its
    arguments that every caller passes a Parameter for, with grad enabled (``init(conv.weights)``
    where ``init`` does ``tensor[:] = ...``; the caller's kinds: NOTE [kinds]), in a file that
    trains (calls ``backward()``)."""
    if not call_sites(ctx, "backward"):
        return
    for fn in ctx.analysis.functions.values():
        a = fn.args
        params = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
        bound = None
        for stmt in own_statements(fn.body):
            for target, what in in_place_writes(stmt):
                t = target.value if isinstance(target, ast.Subscript) else target
                if not isinstance(t, ast.Name) or t.id not in params:
                    continue
                scope = ctx.scope(fn)
                bound = scope.bindings if bound is None else bound
                if t.id in bound and not all(  # `x = convert_to_tensor(x)` gives `x` back
                        gives_back(ctx, b.value, t.id) for b in bound[t.id]  # type: ignore[arg-type]
                ) or scope.grad_off_at(stmt) is not None:  # NOTE [argument given back]
                    continue
                origin = passed_parameter(fn, t.id, ctx)
                if origin is not None:
                    yield Write(stmt, what, t.id, "view of a " if t is not target else "",
                                origin)


def own_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements of a body and its nested blocks (any order), not entering defs or classes."""
    stack = list(body)
    while stack:
        s = stack.pop()
        if isinstance(s, DEFS):
            continue
        yield s
        if isinstance(s, (ast.Expr, ast.Assign, ast.AugAssign, ast.Return, ast.AnnAssign)):
            continue
        for field in ("body", "orelse", "finalbody"):
            sub = getattr(s, field, None)
            if sub:
                stack.extend(sub)
        for h in getattr(s, "handlers", ()):
            stack.extend(h.body)
        for c in getattr(s, "cases", ()):
            stack.extend(c.body)


# functional ops that write their first argument when given ``inplace=True``
INPLACE_FUNCTIONS = frozenset({
    "relu", "relu6", "elu", "selu", "celu", "leaky_relu", "hardtanh", "threshold", "rrelu",
    "hardswish", "hardsigmoid", "silu", "mish", "dropout", "dropout1d", "dropout2d",
    "dropout3d", "alpha_dropout", "feature_alpha_dropout"})


def _inplace_call(value: ast.expr | None) -> ast.expr | None:
    """``F.relu(x, inplace=True)``, ``F.dropout(x, p, inplace=True)``: ``x``, written in
    place."""
    if isinstance(value, ast.Call) and value.args and \
            (dotted(value.func) or "").rpartition(".")[2] in INPLACE_FUNCTIONS and any(
                k.arg == "inplace" and isinstance(k.value, ast.Constant) and k.value.value is True
                for k in value.keywords):
        return value.args[0]
    return None


def in_place_writes(stmt: ast.stmt) -> Iterator[tuple[ast.expr, str]]:
    """(updated tensor expression, what) for an in-place statement."""
    if isinstance(stmt, (ast.Assign, ast.Expr)):
        written = _inplace_call(stmt.value)
        if written is not None:
            yield written, "`inplace=True` call"
    if isinstance(stmt, ast.AugAssign):
        yield stmt.target, "update"
    elif isinstance(stmt, ast.Assign):
        for t in stmt.targets:
            if isinstance(t, ast.Subscript):
                yield t, "slice assignment"
    elif isinstance(stmt, ast.Expr):
        call = stmt.value
        while isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
            method = call.func.attr
            recv = call.func.value
            if method.endswith("_") and not method.startswith("_") and method not in NOT_UPDATES:
                if not (isinstance(recv, ast.Call) and isinstance(recv.func, ast.Attribute)
                        and recv.func.attr.endswith("_")):
                    yield recv, f"`.{method}()`"
                    return
            call = recv


MULTI_VIEWS = frozenset({"chunk", "split", "unbind", "tensor_split", "split_with_sizes"})


def write_error(view: str, target: ast.AST | None = None) -> str:
    """What autograd raises for the write (a view made by ``chunk``/``split``/``unbind``
    is one of several outputs, refused with its own message; checked on torch 2.13)."""
    calls = [n.func.attr for n in walk(target) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Attribute) and n.func.attr in MULTI_VIEWS] \
        if target is not None else []
    if calls:
        op = "Unbind" if calls[0] == "unbind" else "Split"
        return f"Output <i> of {op} is a view and is being modified inplace.`"
    return f"a {view}leaf Variable that requires grad is being used in an in-place operation.`"


def getattr_write(target: ast.expr) -> bool:
    """The write goes into ``getattr(owner, name)`` or a view of it."""
    e = target
    while True:
        if isinstance(e, ast.Subscript):
            e = e.value
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
            e = e.func.value
        else:
            break
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "getattr"
