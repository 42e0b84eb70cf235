"""A function of the file that hands back, unchanged, the value it was given
(NOTE [handed back as given]).

# NOTE [handed back as given]
``loss, label_dic, out_dic = self.train(batch, label_dic, out_dic)`` in a training loop,
where every ``return`` of ``train`` gives back at that place the parameter it got
(``return loss, label_dic, out_dic``; or the element a helper of the file gives back the same
way, ``loss, label_dic = self.save(label_dic, out)``, three calls deep at most): the name is
bound to the very object the call was handed, so it carries no new graph, only what it held
before the loop. With a start that is a display of empty containers or constants (``label_dic
= {k: [] for k in classes}``), it holds no graph at all (a per-pass log of labels, not a
recurrent state). The parameter must never be rebound in the function otherwise.
"""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.reach import called_function, value_of
from gradtrace.lint.flow import Binding, Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import bfs_walk

_DISPLAYS = (ast.Dict, ast.List, ast.Set, ast.Tuple, ast.DictComp, ast.ListComp, ast.SetComp)


def _params(fn: ast.AST) -> list[str]:
    a = fn.args  # type: ignore[attr-defined]
    return [p.arg for p in (*a.posonlyargs, *a.args)]


def _arg_position(call: ast.Call, fn: ast.AST, name: str) -> str | None:
    """The parameter of ``fn`` that ``call`` hands the plain name ``name`` to."""
    ps = _params(fn)
    shift = 1 if ps and ps[0] in ("self", "cls") and isinstance(call.func, ast.Attribute) else 0
    for k, a in enumerate(call.args):
        if isinstance(a, ast.Name) and a.id == name and k + shift < len(ps):
            return ps[k + shift]
    for kw in call.keywords:
        if isinstance(kw.value, ast.Name) and kw.value.id == name and kw.arg in ps:
            return kw.arg
    return None


def hands_back(ctx, fn: ast.AST | None, i: int, width: int, param: str, depth: int = 0) -> bool:
    """Every ``return`` of ``fn`` gives back, at place ``i`` of a ``width``-tuple, its
    parameter ``param`` unchanged."""
    if fn is None or depth > 3 or param not in _params(fn):
        return False
    scope = ctx.scope(fn)
    for b in scope.bindings.get(param, ()):
        if b.stmt is fn or b.kind is not None and value_of(b) is None:
            continue
        if not _rebound_as_given(ctx, scope, b, param, depth):
            return False
    rets = [r for r in bfs_walk(fn) if isinstance(r, ast.Return)]
    return bool(rets) and all(
        isinstance(r.value, ast.Tuple) and len(r.value.elts) == width
        and isinstance(r.value.elts[i], ast.Name) and r.value.elts[i].id == param for r in rets)


def _rebound_as_given(ctx, scope: Scope, b: Binding, name: str, depth: int) -> bool:
    """``b`` rebinds ``name`` to the element a function of the file hands back as given."""
    s = b.stmt
    if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.value, ast.Call)
            and isinstance(s.targets[0], ast.Tuple)):
        return False
    names = [dotted(e) for e in s.targets[0].elts]
    if names.count(name) != 1:
        return False
    g = called_function(s.value, scope, b.line)
    p = _arg_position(s.value, g, name) if g is not None else None
    return p is not None and hands_back(ctx, g, names.index(name), len(names), p, depth + 1)


def carried_as_given(ctx, scope: Scope, b: Binding) -> bool:
    """``b`` (in a tuple unpacking) takes back the object its own name was handed, and every
    other binding of the name is such a hand-back or a display of empty containers or
    constants (NOTE [handed back as given])."""
    if not _rebound_as_given(ctx, scope, b, b.name, 0):
        return False
    for o in scope.bindings.get(b.name, ()):
        if o is b or isinstance(o.stmt, ast.Assign) and _rebound_as_given(
                ctx, scope, o, b.name, 0):
            continue
        v = value_of(o)
        if not isinstance(v, _DISPLAYS) or not _empty_display(v):
            return False
    return True


def _empty_display(v: ast.expr) -> bool:
    """A display whose values are empty displays or constants (``{k: [] for k in keys}``)."""
    if isinstance(v, ast.DictComp):
        parts: list[ast.expr] = [v.value]
    elif isinstance(v, (ast.ListComp, ast.SetComp)):
        parts = [v.elt]
    elif isinstance(v, ast.Dict):
        parts = [x for x in v.values if x is not None]
    else:
        parts = list(v.elts)  # type: ignore[attr-defined]
    return all(isinstance(p, ast.Constant) or isinstance(p, _DISPLAYS[:4])
               and not any(True for _ in ast.iter_child_nodes(p)) for p in parts)
