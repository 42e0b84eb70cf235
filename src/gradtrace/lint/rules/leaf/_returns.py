"""Whether a call of the file's own function (or a method of an object of a class of the file)
returns a non-leaf: a tensor computed from a leaf that requires grad, or from an argument that
is one (GT307 across a helper: ``x_adv = attack.perturb(x)`` then ``x_adv.grad``).

# NOTE [returned entries]
``renders, info = rasterize(means, ...)`` then ``info["means2d"].grad``: the helper returns a
dict literal (directly, or as one element of a returned tuple) whose entry under that key is
computed from a leaf that requires grad or from an argument that is one; every ``return`` must
hold such an entry. That entry is a non-leaf, so its ``.grad`` stays None after backward unless
``retain_grad()`` was called on it; a helper that calls ``retain_grad()`` is left alone."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.kinds import MODULE, OBJECT
from gradtrace.lint.rules.leaf._tensors import (
    COPY_METHODS, DIFF_OPS, VIEW_METHODS, derived_from_grad_leaf, grad_leaf_binding,
)

if TYPE_CHECKING:
    from gradtrace.lint.flow import Scope

MAX_DEPTH = 3
# tensor methods that hand back their receiver (or a leaf): they make nothing non-leaf
LEAF_METHODS = frozenset({"requires_grad_", "detach", "detach_", "clone_detach"})
VIEW_ATTRS = frozenset({"T", "mT", "H", "mH", "real", "imag"})  # views of their tensor


def _callee(call: ast.Call, scope: Scope, line: int
            ) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, bool] | None:
    """(the function ``call`` runs, whether it is a method called through an instance)."""
    an = scope.ctx.analysis
    fn = an.local_callee(call, scope, line)
    if fn is not None:
        return fn, isinstance(call.func, ast.Attribute)
    f = call.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, (ast.Name, ast.Attribute)):
        k = an.kind(f.value, scope, line)
        if k is not None and k.what in (OBJECT, MODULE) and k.cls:
            info = an.classes.get(k.cls.rpartition(".")[2])
            m = info.methods.get(f.attr) if info is not None else None
            if m is not None:
                return m, True
    return None


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> list[str]:
    names = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    return names[1:] if method and names[:1] == ["self"] else names


def call_non_leaf(call: ast.Call, scope: Scope, line: int, depth: int = 0) -> str | None:
    """The function whose return makes ``call``'s result a non-leaf, else None."""
    if depth > MAX_DEPTH:
        return None
    got = _callee(call, scope, line)
    if got is None:
        return None
    fn, method = got
    if fn.decorator_list:
        return None
    params = _params(fn, method)
    hot = frozenset(p for p, a in zip(params, call.args)
                    if _from(a, scope, line, frozenset(), depth + 1))
    inner = scope.ctx.scope(fn)
    rets = [s for s in inner.stmts if isinstance(s, ast.Return)]
    if not rets or any(r.value is None or not non_leaf_expr(r.value, inner, r.lineno, hot,
                                                            depth + 1) for r in rets):
        return None
    return fn.name


def non_leaf_expr(e: ast.AST, scope: Scope, line: int, hot: frozenset[str], depth: int
                  ) -> bool:
    """``e`` holds a tensor with history at ``line``: computed from a leaf that requires grad
    or from a parameter of the function in ``hot`` (one given a non-leaf)."""
    if depth > MAX_DEPTH + 3:
        return False
    if derived_from_grad_leaf(scope, e, line):
        return True
    if isinstance(e, ast.Name):
        b = scope.binding_before(e.id, line)
        if b is None:
            return e.id in hot
        if b.value is None or b.no_grad or isinstance(b.stmt, ast.AugAssign) \
                or grad_leaf_binding(scope, e.id, line):
            return False
        return non_leaf_expr(b.value, scope, b.line, hot, depth + 1)
    if isinstance(e, ast.BinOp):
        return any(_from(side, scope, line, hot, depth) for side in (e.left, e.right))
    if isinstance(e, ast.Subscript) or isinstance(e, ast.Attribute) and e.attr in VIEW_ATTRS:
        return _from(e.value, scope, line, hot, depth)  # an index or a transpose: a view
    if isinstance(e, ast.Call):
        f = e.func
        q = scope.ctx.call_name(e) or ""
        if q.startswith("torch.") and q.rpartition(".")[2] in DIFF_OPS and e.args:
            return _from(e.args[0], scope, line, hot, depth)
        if isinstance(f, ast.Attribute) and f.attr not in LEAF_METHODS and (
                f.attr in COPY_METHODS or f.attr in VIEW_METHODS or f.attr in DIFF_OPS):
            return _from(f.value, scope, line, hot, depth)
        return call_non_leaf(e, scope, line, depth + 1) is not None
    return False


def _from(e: ast.AST, scope: Scope, line: int, hot: frozenset[str], depth: int) -> bool:
    """``e`` carries history (a non-leaf, or a leaf that requires grad) into an op on it."""
    if isinstance(e, ast.Name) and grad_leaf_binding(scope, e.id, line):
        return True
    if isinstance(e, ast.Name) and e.id not in scope.bindings and e.id in hot:
        return True
    if isinstance(e, ast.Name):
        b = scope.binding_before(e.id, line)
        if b is not None and isinstance(b.value, ast.Call) \
                and isinstance(b.value.func, ast.Attribute) \
                and b.value.func.attr == "requires_grad_":
            return True  # `xadv = x.requires_grad_()`: a leaf that requires grad
    return non_leaf_expr(e, scope, line, hot, depth + 1)


def element_non_leaf(e: ast.Subscript, scope: Scope, line: int) -> str | None:
    """``info["key"]`` (NOTE [returned entries]): the function whose result holds, under that
    key, a non-leaf, else None."""
    key = e.slice.value if isinstance(e.slice, ast.Constant) else None
    if not isinstance(key, str) or not isinstance(e.value, ast.Name):
        return None
    b = scope.binding_before(e.value.id, line)
    if b is None or b.no_grad or not isinstance(b.stmt, ast.Assign) \
            or len(b.stmt.targets) != 1 or not isinstance(b.stmt.value, ast.Call):
        return None
    t, call = b.stmt.targets[0], b.stmt.value
    if isinstance(t, ast.Name):
        index = None
    elif isinstance(t, ast.Tuple) and all(isinstance(x, ast.Name) for x in t.elts):
        index = [x.id for x in t.elts].index(e.value.id)  # type: ignore[attr-defined]
    else:
        return None
    got = _callee(call, scope, b.line)
    if got is None or got[0].decorator_list:
        return None
    fn, method = got
    hot = frozenset(p for p, a in zip(_params(fn, method), call.args)
                    if _from(a, scope, line, frozenset(), 1))
    inner = scope.ctx.scope(fn)
    if next(inner.calls_to("retain_grad"), None) is not None:
        return None
    rets = [s for s in inner.stmts if isinstance(s, ast.Return)]
    for r in rets:
        v = r.value
        if index is not None:
            if not isinstance(v, ast.Tuple) or len(v.elts) != len(t.elts):  # type: ignore[attr-defined]
                return None
            v = v.elts[index]
        if isinstance(v, ast.Name):
            vb = inner.binding_before(v.id, r.lineno)
            v = vb.value if vb is not None and not isinstance(vb.stmt, ast.AugAssign) else None
        if not isinstance(v, ast.Dict):
            return None
        entry = next((val for k, val in zip(v.keys, v.values)
                      if isinstance(k, ast.Constant) and k.value == key), None)
        # depth -8: the entry is followed through its own rebindings (`m = (K @ c.T).T`,
        # `m = m[:, :2] / m[:, 2:]`: each hop costs two) further than an argument is
        if entry is None or not non_leaf_expr(entry, inner, r.lineno, hot, -8):
            return None
    return fn.name if rets else None
