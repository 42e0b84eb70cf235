"""Whose parameters an optimizer holds when it is one element of a list of optimizers.

# NOTE [optimizer lists]
An ensemble keeps one optimizer per network: ``self.critic_opts = [Adam(c.parameters()) for c
in self.critics]``, stepped as ``for loss, opt in zip(losses, self.critic_opts)`` (or in a
comprehension). The kinds (:mod:`.facts`) know an optimizer built from ``model.parameters()``;
:func:`element_owners` reads the element: the loop target that names the optimizer, the
iterable it comes from (through ``zip``), and the list's construction (in the function, or on
``self`` in the class), giving the list of networks (``self.critics``). :func:`aliases` gives
the names a loop over that list binds to its elements (``for critic in self.critics``), in the
function and the methods of the class, so a call of ``critic(...)`` reads as a call of one.
Also, an optimizer of ``self`` built in ``__init__`` from an argument that is stored on
``self`` (``self.policy = policy``; ``Adam(policy.parameters())``) holds ``self.policy``.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.update_helpers import node_code
from gradtrace.lint.names import dotted

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

COMPS = (ast.ListComp, ast.GeneratorExp, ast.SetComp)


def element_owners(opt: ast.expr, stmt: ast.stmt, scope: Scope, cls: ast.ClassDef | None
                   ) -> frozenset[str]:
    """The list of networks whose element's optimizer ``opt`` (a loop target) is."""
    if not isinstance(opt, ast.Name):
        return frozenset()
    src = _iterable_of(opt.id, stmt, scope)
    if src is None:
        return frozenset()
    name = dotted(src)
    if name is None:
        return frozenset()
    made = _list_value(name, scope, cls)
    if isinstance(made, COMPS) and len(made.generators) == 1:
        gen = made.generators[0]
        if isinstance(gen.target, ast.Name) and _parameters_of(made.elt, gen.target.id):
            over = dotted(gen.iter)
            return frozenset({over}) if over else frozenset()
    return frozenset()


def aliases(owner: str, fn: ast.AST, cls: ast.ClassDef | None, ctx: Context) -> frozenset[str]:
    """Names bound to the elements of ``owner`` by loops over it in ``fn`` and the methods of
    its class (NOTE [optimizer lists])."""
    out: set[str] = set()
    roots = [fn, *(cls.body if cls is not None else ())]
    for root in roots:
        if owner.partition(".")[2].partition(".")[0] not in node_code(ctx, root):
            continue
        for n in ast.walk(root):
            if isinstance(n, (ast.For, ast.comprehension)) and dotted(n.iter) == owner and \
                    isinstance(n.target, ast.Name):
                out.add(n.target.id)
    return frozenset(out)


def stored_owners(over: frozenset[str], cls: ast.ClassDef | None) -> frozenset[str]:
    """``over`` with ``self.<x>`` added for an argument ``x`` that ``__init__`` stores as
    ``self.<x> = x`` (or ``self.a, self.b = a, b``)."""
    init = next((m for m in cls.body if isinstance(m, ast.FunctionDef) and
                 m.name == "__init__"), None) if cls is not None else None
    if init is None:
        return over
    extra = set()
    for s in init.body:
        if isinstance(s, ast.Assign) and len(s.targets) == 1:
            t, v = s.targets[0], s.value
            pairs = zip(t.elts, v.elts) if isinstance(t, ast.Tuple) and isinstance(
                v, ast.Tuple) and len(t.elts) == len(v.elts) else [(t, v)]
            for a, b in pairs:
                if isinstance(b, ast.Name) and b.id in over and dotted(a) == "self." + b.id:
                    extra.add("self." + b.id)
    return over | extra


def _iterable_of(name: str, stmt: ast.stmt, scope: Scope) -> ast.expr | None:
    """The iterable whose elements the loop target ``name`` takes, through ``zip``."""
    loops = [*(n for n in ast.walk(stmt) if isinstance(n, ast.comprehension)),
             *(lp for lp in reversed(scope.loops_of(stmt)) if isinstance(lp, ast.For))]
    for lp in loops:
        t, it = lp.target, lp.iter
        if isinstance(t, ast.Name) and t.id == name:
            return it
        if isinstance(t, ast.Tuple) and isinstance(it, ast.Call) and \
                dotted(it.func) == "zip" and len(it.args) == len(t.elts):
            for e, a in zip(t.elts, it.args):
                if isinstance(e, ast.Name) and e.id == name:
                    return a
    return None


def _list_value(name: str, scope: Scope, cls: ast.ClassDef | None) -> ast.expr | None:
    if not name.startswith("self."):
        b = scope.binding_before(name, 10 ** 9)
        return b.value if b is not None else None
    for m in cls.body if cls is not None else ():
        if isinstance(m, ast.FunctionDef) and m.name == "__init__":
            for s in ast.walk(m):
                if isinstance(s, ast.Assign) and any(dotted(t) == name for t in s.targets):
                    return s.value
    return None


def _parameters_of(e: ast.expr, target: str) -> bool:
    """``Adam(c.parameters(), lr=...)``: an optimizer call over ``target``'s parameters."""
    if not isinstance(e, ast.Call) or not e.args:
        return False
    a = e.args[0]
    return isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute) and \
        a.func.attr == "parameters" and dotted(a.func.value) == target
