"""Tensors that are other objects than the parameters they come from: ``p.data``,
``p.detach()``, the values of ``model.state_dict()`` (detached unless ``keep_vars=True``), and
what a loop or a comprehension takes from them. A flag set on one of them (``requires_grad``)
stays on that object: the parameter keeps its own (docs/triage/static23b.md)."""
from __future__ import annotations

import ast

from gradtrace.lint.flow import Scope
from gradtrace.lint.nodes import walk

COPY_ATTR = "data"
COPY_CALL = "detach"
STATE = "state_dict"
STATE_VIEWS = ("items", "values")


def state_dict_call(e: ast.expr) -> bool:
    """``m.state_dict()`` without ``keep_vars=True`` (then its values are detached)."""
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
        and e.func.attr == STATE and not e.args and not any(
            k.arg == "keep_vars" and not (isinstance(k.value, ast.Constant)
                                          and k.value.value is False) for k in e.keywords)


def _bound_to(scope: Scope, name: str, before: int) -> ast.expr | None:
    """The value of the last plain ``name = ...`` of ``scope`` before line ``before``."""
    got = None
    for s in scope.stmts:
        if s.lineno >= before:
            break
        if isinstance(s, ast.Assign) and len(s.targets) == 1 \
                and isinstance(s.targets[0], ast.Name) and s.targets[0].id == name:
            got = s.value
    return got


def _state_dict(e: ast.expr, scope: Scope, line: int) -> bool:
    """``m.state_dict()`` or a name bound to it."""
    if isinstance(e, ast.Name):
        v = _bound_to(scope, e.id, line)
        return v is not None and state_dict_call(v)
    return state_dict_call(e)


def copy_expr(e: ast.expr) -> str | None:
    """``x.data`` / ``x.detach()``: how the expression copies."""
    if isinstance(e, ast.Attribute) and e.attr == COPY_ATTR and isinstance(e.ctx, ast.Load):
        return f"a new tensor at each `.{COPY_ATTR}`"
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr == COPY_CALL and not e.args:
        return f"a new tensor at each `.{COPY_CALL}()`"
    return None


def _element_copy(it: ast.expr, target: ast.expr, var: str, scope: Scope, line: int
                  ) -> str | None:
    """How the elements ``var`` takes from iterable ``it`` (a ``for`` target) are copies."""
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) \
            and it.func.attr in STATE_VIEWS and not it.args \
            and _state_dict(it.func.value, scope, line):
        t = target.elts[-1] if it.func.attr == "items" and isinstance(target, ast.Tuple) \
            and len(target.elts) == 2 else target
        if isinstance(t, ast.Name) and t.id == var:
            return "a `state_dict()` tensor"
        return None
    if isinstance(it, ast.Name):
        v = _bound_to(scope, it.id, line)
        if v is None or isinstance(v, ast.Name):
            return None
        it = v
    if isinstance(it, (ast.ListComp, ast.GeneratorExp, ast.SetComp)) \
            and isinstance(target, ast.Name) and target.id == var:
        how = copy_expr(it.elt)
        return f"an element of a list of copies ({how.rpartition(' ')[2]})" if how else None
    return None


def copy_of_param(e: ast.expr, scope: Scope, stmt: ast.stmt) -> str | None:
    """How ``e`` (the receiver of a flag) is a tensor other than the one it comes from:
    ``.data``, ``.detach()``, ``sd[k]`` / ``m.state_dict()[k]``, or a loop variable over
    ``sd.items()`` / ``sd.values()`` or over a list of ``.detach()`` / ``.data`` results."""
    how = copy_expr(e)
    if how is not None:
        return None if _declared_other(e, scope) else how
    if isinstance(e, ast.Subscript) and _state_dict(e.value, scope, stmt.lineno):
        return "a `state_dict()` tensor"
    if not isinstance(e, ast.Name):
        return None
    for loop in reversed(scope.loops_of(stmt)):
        if not isinstance(loop, (ast.For, ast.AsyncFor)):
            continue
        if not any(isinstance(n, ast.Name) and n.id == e.id for n in walk(loop.target)):
            continue
        # the variable must not be rebound in the loop before the statement
        if any(isinstance(n, ast.Name) and n.id == e.id and isinstance(n.ctx, ast.Store)
               and n.lineno < stmt.lineno for s in loop.body for n in walk(s)):
            return None
        return _element_copy(loop.iter, loop.target, e.id, scope, stmt.lineno)
    return None


TENSOR_TYPES = frozenset({"Tensor", "Parameter", "Any"})


def _declared_other(e: ast.expr, scope: Scope) -> bool:
    """``x.data`` where ``x`` is an argument of the function annotated with a type that is not
    a tensor (``def act_fn(x: stk.Matrix)``): its ``data`` is that object's field (megablocks'
    sparse matrix keeps its values there), the same tensor at each read."""
    if not (isinstance(e, ast.Attribute) and e.attr == COPY_ATTR and isinstance(e.value, ast.Name)):
        return False
    a = getattr(scope.node, "args", None)
    arg = next((x for x in (*a.posonlyargs, *a.args, *a.kwonlyargs) if x.arg == e.value.id),
               None) if isinstance(a, ast.arguments) else None
    if arg is None or arg.annotation is None or any(
            isinstance(n, ast.Constant) for n in walk(arg.annotation)):
        return False  # not annotated, or spelled in a string
    named = [n.attr if isinstance(n, ast.Attribute) else n.id for n in walk(arg.annotation)
             if isinstance(n, (ast.Name, ast.Attribute))]
    return bool(named) and not TENSOR_TYPES.intersection(named)
