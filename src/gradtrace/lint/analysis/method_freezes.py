"""Whether a module held on ``self`` was frozen by a method of the class before a line.

# NOTE [frozen by a method]
``self.set_model_eval_mode()`` then ``for x, y in loader: total += self.model.loss(
self.model(x), y)``: the method (the class's own, or one it inherits from a base class of the
file or, through the project index, of another file: three hops) runs ``for p in
self.model.parameters(): p.requires_grad = False`` (or ``self.model.requires_grad_(False)``)
at the top level of its body. Every weight of ``self.model`` is then frozen: its calls (and
its methods', ``self.model.loss``) carry a graph only through their inputs (for a local
name: NOTE [frozen local module]). Known only when, in the function reading it, that call is a
statement before the line and nothing between them (or in a loop around the line) may undo
it: a call of a method that sets ``requires_grad`` of that module otherwise (its
``set_model_train_mode()``), an unfreeze written there, or a new ``self.model = ...``.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.frozen_params import frozen_local
from gradtrace.lint.analysis.project import foreign_def
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import scope_nodes

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

MAX_HOPS = 3
FREEZE, UNFREEZE = 1, 2


def frozen_callee(ctx: Context, scope: object, callee: str, line: int) -> object:
    """The module ``callee`` names at ``line`` has every weight frozen: a local name
    (NOTE [frozen local module]) or ``self.<attr>`` (and its methods) frozen by a method of
    the class (NOTE [frozen by a method]). Truthy when known."""
    return frozen_local(ctx, scope, callee, line) or _frozen_self(ctx, scope, callee, line)


def _frozen_self(ctx: Context, scope: object, callee: str, line: int) -> bool:
    parts = callee.split(".")
    fn = getattr(scope, "node", None)
    if len(parts) not in (2, 3) or parts[0] != "self" \
            or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    attr = "self." + parts[1]
    events = ctx.memo("method-freezes:" + attr, fn, lambda: _events(ctx, fn, attr))
    if not any(e == FREEZE for _s, e in events):
        return False
    loops = [n for n in scope_nodes(fn) if isinstance(n, (ast.For, ast.AsyncFor, ast.While))
             and n.lineno <= line <= (n.end_lineno or n.lineno)]
    last = max((s for s, e in events if e == FREEZE and s.lineno < line
                and not any(_inside(s, lp) for lp in loops)),
               key=lambda s: s.lineno, default=None)
    if last is None:
        return False
    return not any(e == UNFREEZE and (last.lineno < s.lineno < line or any(
        _inside(s, lp) for lp in loops)) for s, e in events)


def _events(ctx: Context, fn: ast.AST, attr: str) -> list[tuple[ast.stmt, int]]:
    """The statements of ``fn`` that freeze or may unfreeze ``attr``'s weights."""
    cls = ctx.analysis.class_of(fn)
    if cls is None:
        return []
    events: list[tuple[ast.stmt, int]] = []
    for n in scope_nodes(fn):
        if not isinstance(n, ast.stmt):
            continue
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and any(
                dotted(t) == attr for t in getattr(n, "targets", [getattr(n, "target", None)])):
            events.append((n, UNFREEZE))  # a new module there: nothing known of it
            continue
        own = _effect(n, attr, top=False)
        if own:
            events.append((n, own))
        c = n.value if isinstance(n, ast.Expr) else None
        if isinstance(c, ast.Call) and not c.args and not c.keywords \
                and isinstance(c.func, ast.Attribute) and dotted(c.func.value) == "self":
            got = _method_effect(ctx, cls.node, c.func.attr, attr, 0, set())
            if got:
                events.append((n, got))
    return events


def _inside(s: ast.stmt, loop: ast.stmt) -> bool:
    return loop.lineno < s.lineno <= (loop.end_lineno or loop.lineno)


def _method_effect(ctx: Context, node: ast.ClassDef, name: str, attr: str, hops: int,
                   seen: set[int]) -> int:
    """What the method ``name`` the class ``node`` runs does to ``attr``'s weights: FREEZE at
    the top level of its body, UNFREEZE anywhere, else 0."""
    if hops > MAX_HOPS or id(node) in seen:
        return UNFREEZE if hops > MAX_HOPS else 0
    seen.add(id(node))
    m = next((s for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
              and s.name == name), None)
    if m is not None:
        if any(_effect(n, attr, top=False) == UNFREEZE for n in scope_nodes(m)):
            return UNFREEZE
        return FREEZE if any(_effect(s, attr, top=True) == FREEZE for s in m.body) else 0
    for b in node.bases:
        own = ctx.analysis.classes.get(b.id) if isinstance(b, ast.Name) else None
        got = (ctx, own.node) if own is not None else foreign_def(ctx, b)
        if got is None or not isinstance(got[1], ast.ClassDef):
            continue
        found = _method_effect(got[0], got[1], name, attr, hops + 1, seen)
        if found:
            return found
    return 0


def _effect(n: ast.AST, attr: str, top: bool) -> int:
    """``for p in <attr>.parameters(): p.requires_grad = <v>`` or ``<attr>.requires_grad_(
    <v>)``: FREEZE for a constant False, UNFREEZE for anything else; 0 for other statements
    (``top``: the loop must hold nothing but such writes)."""
    if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call):
        c = n.value
        f = c.func
        if isinstance(f, ast.Attribute) and f.attr == "requires_grad_":
            if dotted(f.value) != attr:
                return 0
            v = c.args[0] if c.args else next(
                (k.value for k in c.keywords if k.arg == "requires_grad"), None)
            return FREEZE if _false(v) else UNFREEZE
        return 0
    if not isinstance(n, ast.For) or not isinstance(n.target, ast.Name):
        return 0
    it = n.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
            and it.func.attr == "parameters" and dotted(it.func.value) == attr):
        return 0
    writes = [s for s in n.body if isinstance(s, ast.Assign) and len(s.targets) == 1
              and isinstance(s.targets[0], ast.Attribute) and s.targets[0].attr == "requires_grad"
              and dotted(s.targets[0].value) == n.target.id]
    if any(not _false(s.value) for s in writes):
        return UNFREEZE
    if not writes or top and len(writes) != len(n.body) or n.orelse:
        return 0
    return FREEZE


def _false(v: ast.AST | None) -> bool:
    return isinstance(v, ast.Constant) and v.value is False


def graph_call(ctx: Context, scope: object, callee: str, line: int) -> bool:
    """A module-like call (:func:`model_calls.runs_model`) whose module is not known frozen
    (NOTE [frozen by a method]): its output carries a graph of its own."""
    from gradtrace.lint.analysis.model_calls import runs_model
    return runs_model(ctx, scope, callee, line) and not frozen_callee(ctx, scope, callee, line)
