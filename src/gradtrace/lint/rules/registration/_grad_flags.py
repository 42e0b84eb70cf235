"""Statements that switch ``requires_grad`` on the parameters of a module (freeze / unfreeze):
``for p in m.parameters(): p.requires_grad = False``, ``m.requires_grad_(False)``, read once
per scope (:func:`grad_flags`) for the registration and distributed rules. Holds no rule."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.flag_truth import truth_under
from gradtrace.lint.analysis.namespace_settings import namespace_settings
from gradtrace.lint.names import dotted, indexed_path
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.leaf._tensors import is_false, is_true

if TYPE_CHECKING:
    from gradtrace.lint.flow import Scope


@dataclass(frozen=True)
class GradFlag:
    """A statement that sets ``requires_grad`` on every parameter under ``root`` (or some)."""

    stmt: ast.stmt
    root: str            # module spelling (`names.indexed_path`) whose parameters are affected
    value: bool
    conditional: bool    # only some parameters (an ``if`` inside the loop)


def flag_statement(s: ast.stmt) -> ast.stmt:
    """The statement that sets the flag: for a loop, the ``requires_grad`` write (or
    ``requires_grad_`` call) of its body, else one nested deeper (under an ``if``); ``s``
    itself otherwise."""
    if not isinstance(s, (ast.For, ast.AsyncFor)):
        return s
    direct = next((b for b in s.body if _sets_flag(b)), None)
    if direct is not None:
        return direct
    nested = (n for b in s.body for n in walk(b) if _sets_flag(n))
    return next(nested, s)  # type: ignore[arg-type]


def _sets_flag(n: ast.AST) -> bool:
    if isinstance(n, ast.Assign):
        return any(isinstance(t, ast.Attribute) and t.attr == "requires_grad" for t in n.targets)
    return isinstance(n, ast.Expr) and isinstance(n.value, ast.Call) \
        and isinstance(n.value.func, ast.Attribute) and n.value.func.attr == "requires_grad_"


def grad_flags(scope: Scope) -> list[GradFlag]:
    """Freeze/unfreeze statements of a scope, in source order (cached)."""
    return scope.ctx.memo("gt4-grad-flags", scope.node, lambda: _grad_flags(scope))


def _grad_flags(scope: Scope) -> list[GradFlag]:
    out: list[GradFlag] = []
    settings = namespace_settings(scope.ctx, scope)  # NOTE [fixed namespace settings]
    for s in scope.stmts:
        if isinstance(s, (ast.For, ast.AsyncFor)):
            got = _loop_flag(s, settings)
            if got is not None:
                out.append(got)
        elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
            call = s.value
            f = call.func
            if isinstance(f, ast.Attribute) and f.attr == "requires_grad_":
                root = indexed_path(f.value)
                if root:  # a tensor's flag too: callers match roots against module paths
                    value = not call.args or is_true(call.args[0])
                    if call.args and not (is_true(call.args[0]) or is_false(call.args[0])):
                        continue
                    out.append(GradFlag(s, root, value, False))
    return out


def _loop_flag(loop: ast.For | ast.AsyncFor, settings: dict[str, object] | None = None
               ) -> GradFlag | None:
    it = loop.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
            and it.func.attr in ("parameters", "named_parameters")):
        return None
    root = indexed_path(it.func.value)
    t = loop.target
    var = dotted(t.elts[-1]) if isinstance(t, ast.Tuple) and t.elts else dotted(t)
    if root is None or var is None:
        return None
    got = _every_path(loop.body, var, settings or {})
    if got is not None:
        return GradFlag(loop, root, got, False)
    for s in walk(loop):
        if isinstance(s, ast.stmt) and s is not loop:
            got = _flag_value(s, var)
            if got is not None:
                return GradFlag(loop, root, got, True)
    return None


def _every_path(body: list[ast.stmt], var: str, settings: dict[str, object]) -> bool | None:
    """The flag every pass through ``body`` sets on ``var``: a statement of it, or an ``if``
    whose branches all set the same value (`if name in frozen: p.requires_grad = False` /
    `else: p.requires_grad = False` freezes every parameter). The last write wins: a later
    statement of the body that may set the other value (`v.requires_grad = False`, then `if
    'transformer' in k: v.requires_grad = True`) leaves no value common to every pass."""
    for i, s in enumerate(body):
        got = _flag_value(s, var)
        t = truth_under(s.test, settings) if settings and isinstance(s, ast.If) else None
        if got is None and t is not None:  # a fixed setting picks the arm
            got = _every_path(s.body if t else s.orelse, var, settings)
            if got is not None:
                later = {_flag_value(n, var) for x in body[i + 1:] for n in walk(x)}
                return None if (not got) in later else got
            continue
        if got is None and isinstance(s, ast.If) and s.orelse:
            a, b = _every_path(s.body, var, settings), _every_path(s.orelse, var, settings)
            got = a if a is not None and a == b else None
        if got is not None:
            later = {_flag_value(n, var) for t in body[i + 1:] for n in walk(t)}
            return None if (not got) in later else got
    return None


def _flag_value(s: ast.AST, var: str) -> bool | None:
    if isinstance(s, ast.Assign) and len(s.targets) == 1:
        t = s.targets[0]
        if isinstance(t, ast.Attribute) and t.attr == "requires_grad" and dotted(t.value) == var:
            return True if is_true(s.value) else False if is_false(s.value) else None
    if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
        f = s.value.func
        if isinstance(f, ast.Attribute) and f.attr == "requires_grad_" and dotted(f.value) == var:
            args = s.value.args
            return True if not args or is_true(args[0]) else False if is_false(args[0]) else None
    return None
