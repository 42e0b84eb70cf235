"""A helper's result in the arm its flag argument selects at one call.

# NOTE [asserted flags]
``assert is_feature == True`` then ``z_support, z_query = self.parse_feature(x, is_feature)``:
at that call the flag is true, and the helper's ``if is_feature: z_all = x`` arm is the one that
runs (S2M2's ``set_forward_adaptation``: the features are given, ``x = Variable(x.cuda())``,
and only the other arm runs ``self.feature.forward(x)``). A flag is known at a call when the
argument is the constant ``True``/``False``, or a name the calling function asserts (``assert
flag``, ``assert flag == True``, ``assert flag is True``, ``assert not flag``) in its own body
before the call and does not bind again in between. In the helper, a binding inside an ``if``
arm whose test the known flags decide false (:func:`.flag_truth.truth_under`) never runs; an
element of the returned tuple is then read through the bindings left, name by name (six deep),
and has no history when every path ends in a cut (``Variable(t)``, ``.detach()``), a new
tensor or a number (:func:`.graph_deps.loads` yields nothing). Otherwise nothing is known.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Callable, Iterator

from gradtrace.lint.analysis.flag_truth import truth_under
from gradtrace.lint.nodes import parent_map, walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def known_flags(ctx: Context, scope: Scope, call: ast.Call, fn: ast.AST) -> dict[str, object]:
    """``$param`` -> value for each parameter of ``fn`` given a constant bool, or a name the
    calling function asserts true (or false) before ``call`` (NOTE [asserted flags])."""
    if not isinstance(fn, _FUNCS) or any(isinstance(a, ast.Starred) for a in call.args):
        return {}
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    if params and params[0] in ("self", "cls") and isinstance(call.func, ast.Attribute):
        params = params[1:]
    given = dict(zip(params, call.args))
    given.update((k.arg, k.value) for k in call.keywords if k.arg)
    asserted = _asserted(ctx, scope, call)
    out: dict[str, object] = {}
    for p, v in given.items():
        if isinstance(v, ast.Constant) and isinstance(v.value, bool):
            out["$" + p] = v.value
        elif isinstance(v, ast.Name) and v.id in asserted:
            out["$" + p] = asserted[v.id]
    return out


def _asserted(ctx: Context, scope: Scope, call: ast.Call) -> dict[str, bool]:
    """Names the function asserts in its own body before the statement holding ``call``
    (its body's ``assert`` statements listed once per scope: a module's body is long)."""
    asserts = ctx.memo("flag-asserts", scope.node, lambda: [
        s for s in getattr(scope.node, "body", []) if isinstance(s, ast.Assert)])
    line = call.lineno
    out: dict[str, bool] = {}
    for s in asserts:
        if s.lineno >= line:
            break
        got = _flag_test(s.test)
        if got is None:
            continue
        name, value = got
        if any(s.lineno < b.line < line for b in scope.bindings.get(name, ())):
            continue  # bound again before the call
        out[name] = value
    return out


def _flag_test(t: ast.expr) -> tuple[str, bool] | None:
    """``flag``, ``not flag``, ``flag == True``, ``flag is False``... -> (name, value)."""
    if isinstance(t, ast.Name):
        return t.id, True
    if isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Not) and isinstance(t.operand, ast.Name):
        return t.operand.id, False
    if isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.left, ast.Name) \
            and isinstance(t.comparators[0], ast.Constant) \
            and isinstance(t.comparators[0].value, bool) \
            and isinstance(t.ops[0], (ast.Eq, ast.Is, ast.NotEq, ast.IsNot)):
        same = isinstance(t.ops[0], (ast.Eq, ast.Is))
        return t.left.id, t.comparators[0].value == same
    return None


def plain_in_arm(ctx: Context, fn: ast.AST, flags: dict[str, object], i: int, width: int,
                 loads: Callable[[ast.AST], Iterator[tuple[str, ast.AST]]]) -> bool:
    """Element ``i`` of the ``width``-tuple every ``return`` of ``fn`` that runs under
    ``flags`` gives back has no history (NOTE [asserted flags]); ``loads``: the names whose
    values flow into an expression (:func:`.graph_deps.loads`)."""
    if not flags or not isinstance(fn, _FUNCS):
        return False
    parents = ctx.memo("flag-arms-parents", fn, lambda: parent_map(fn))
    scope = ctx.scope(fn)
    rets = [r for r in walk(fn) if isinstance(r, ast.Return) and not _dead(r, fn, parents, flags)]
    if not rets:
        return False
    arm = _Arm(scope, fn, parents, flags, loads)
    for r in rets:
        v = r.value
        if not (isinstance(v, ast.Tuple) and len(v.elts) == width) \
                or not arm.clean(v.elts[i], r.lineno, 0):
            return False
    return True


class _Arm:
    """:func:`plain_in_arm`'s walk back through the bindings (an object, not a recursive
    closure: NOTE [gc])."""

    def __init__(self, scope: Scope, fn: ast.AST, parents: dict[int, ast.AST],
                 flags: dict[str, object],
                 loads: Callable[[ast.AST], Iterator[tuple[str, ast.AST]]]) -> None:
        self.scope, self.fn, self.parents, self.flags, self.loads = scope, fn, parents, flags, loads
        self.seen: set[int] = set()

    def clean(self, e: ast.expr, line: int, depth: int) -> bool:
        """``e`` (read at ``line``) is computed from values without history."""
        if depth > 6:
            return False
        while isinstance(e, ast.Subscript):
            e = e.value  # `z_all[:, :self.n_support]`: the index carries no history
        for name, _ in self.loads(e):
            bs = [b for b in self.scope.bindings_before(name.partition(".")[0], line)
                  if not _dead(b.stmt, self.fn, self.parents, self.flags)]
            if not bs:
                return False  # a parameter, a global: not known
            for b in bs:
                if id(b) in self.seen:
                    continue
                self.seen.add(id(b))
                if b.value is None or not self.clean(b.value, b.line, depth + 1):
                    return False
        return True


def _dead(node: ast.AST, fn: ast.AST, parents: dict[int, ast.AST],
          flags: dict[str, object]) -> bool:
    """``node`` sits in an ``if`` arm of ``fn`` that the flags decide is not taken."""
    child: ast.AST = node
    p = parents.get(id(node))
    while p is not None and p is not fn:
        if isinstance(p, ast.If) and child is not p.test:
            t = truth_under(p.test, flags)
            if t is not None and (child in p.body) != t:
                return True
        child, p = p, parents.get(id(p))
    return False
