"""Attributes of a class that hold a non-leaf tensor: ``self.x = self.y[...]`` of a tensor
that requires grad, or arithmetic on one (GT306's optimizer arguments), and ``self.<attr>``
bound to a weighted layer's output (GT307's ``.grad`` reads). Holds no rule."""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.analysis.grad_values import requires_grad
from gradtrace.lint.analysis.kinds import MODULE, OBJECT, PARAMETER, TENSOR, BUFFER, Kind
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import bfs_walk, walk
from gradtrace.lint.rules.leaf._tensors import grad_factory, is_parameter_call, is_true


def _sliced_attr(e: ast.AST, ctx: Context) -> tuple[ast.stmt, str] | None:
    """``(assignment, "self.y")`` when ``e`` is ``self.x`` and the class sets ``self.x =
    self.y[...]`` (once) where ``self.y`` requires grad: made with ``requires_grad=True``, an
    ``nn.Parameter``, or switched on with ``self.y.requires_grad_()`` earlier in that method."""
    if not isinstance(e, ast.Attribute):
        return None
    cls = ctx.analysis.class_of(ctx.function) if dotted(e.value) == "self" \
        else _instance_class(e.value, ctx)
    info = cls.attrs.get(e.attr) if cls is not None else None
    if info is None or info.later:
        return None
    if isinstance(info.value, ast.BinOp):  # `self.w = (self.w0.clone().requires_grad_() * 1.2)`
        side = next((e for e in (info.value.left, info.value.right) if _flagged(e, ctx)), None)
        text = ctx.source(side) if side is not None else ""
        return (info.stmt, "arithmetic on `" + (text if len(text) <= 40 else text[:37] + "...")
                + "`, which requires grad") if side is not None else None
    if not isinstance(info.value, ast.Subscript):
        return None
    base = info.value.value
    if not (isinstance(base, ast.Attribute) and dotted(base.value) == "self"):
        return None
    src = cls.attrs.get(base.attr)  # type: ignore[union-attr]
    if src is None or src.value is None:
        return None
    if grad_factory(src.value, ctx) is not None or is_parameter_call(src.value, ctx):
        return info.stmt, f"a slice of `self.{base.attr}`, which requires grad"
    for st in bfs_walk(info.method):
        if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) \
                and st.lineno < info.stmt.lineno and src.method is info.method \
                and dotted(st.value.func) == f"self.{base.attr}.requires_grad_" \
                and (not st.value.args or is_true(st.value.args[0])):
            return info.stmt, f"a slice of `self.{base.attr}`, which requires grad"
    return None


def _instance_class(e: ast.expr, ctx: Context):  # type: ignore[no-untyped-def]
    """The class of the file whose instance ``e`` is (``clf`` of ``clf = LogReg(5)``, the
    analysis layer's kind): its ``__init__`` attributes are the ones ``clf.w`` reads."""
    if not isinstance(e, ast.Name):
        return None
    k = ctx.analysis.kind(e)
    return ctx.analysis.classes.get(k.cls) if k is not None and k.what in (OBJECT, MODULE) \
        and k.cls else None


def _flagged(e: ast.AST, ctx: Context) -> bool:
    """A tensor made to require grad right there: a factory with ``requires_grad=True``, an
    ``nn.Parameter``, or ``<t>.requires_grad_()`` (arithmetic on any of them is a non-leaf)."""
    return grad_factory(e, ctx) is not None or is_parameter_call(e, ctx) or (
        isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute)
        and e.func.attr == "requires_grad_" and not e.keywords
        and (not e.args or is_true(e.args[0])))


LEAF_KINDS = frozenset({PARAMETER, TENSOR, BUFFER})


def _module_output_attr(e: ast.Attribute, ctx: Context) -> ast.stmt | None:
    """The statement of a file module class that binds ``self.<attr>`` to the output of one
    of its weighted layers (NOTE [values that require grad]), when ``e`` is ``<obj>.<attr>``
    of an instance of that class, every binding of the attribute is such an output, the
    file calls ``backward()`` and retains no gradient of it."""
    an = ctx.analysis
    k = an.kind(e.value)
    cls = an.classes.get(k.cls or "") if k is not None and k.what == MODULE else None
    if cls is None or not call_sites(ctx, "backward") or any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "retain_grad" and isinstance(n.func.value, ast.Attribute)
            and n.func.value.attr == e.attr for n in walk(ctx.tree)):
        return None
    found: ast.stmt | None = None
    for m in cls.methods.values():
        for st in walk(m):
            if not isinstance(st, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                continue
            targets = st.targets if isinstance(st, ast.Assign) else [st.target]
            if not any(isinstance(t, ast.Attribute) and t.attr == e.attr
                       and dotted(t.value) == "self" for t in targets):
                continue
            if not isinstance(st, ast.Assign) or len(targets) != 1 or st.value is None \
                    or requires_grad(ctx, m, st.value, st.lineno) is None \
                    or not isinstance(st.value, (ast.Call, ast.BinOp)) \
                    or (an.kind_in(st.value, m, st.lineno) or Kind("?")).what in LEAF_KINDS \
                    or _input_made_leaf(st.value, m):
                return None  # a Parameter or a factory's tensor is a leaf
            found = found or st
    return found


def _input_made_leaf(v: ast.expr, m: ast.AST) -> bool:
    """``image.requires_grad_()`` of an argument of the method: the caller's input (a leaf)
    made to require grad in place, the saliency methods' way; backward fills its ``.grad``."""
    args = getattr(m, "args", None)
    return isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
        and v.func.attr == "requires_grad_" and isinstance(v.func.value, ast.Name) \
        and args is not None and v.func.value.id in {a.arg for a in args.args}
