"""The terms of a loss summed from a dict (or a list) of named terms.

# NOTE [summed dict of terms]
``losses = {"CD": chamfer}``, ``losses["WREG"] = reg(w) * weight``, ``loss =
sum(losses.values())``: detection, deformation and GAN trainers keep their loss terms in a dict
to log them, and backpropagate the sum. The additive terms of that sum are the dict's entries,
each read where it was stored: a term cut there adds nothing to any gradient, as a cut term
of ``a + b`` does. Read only when the dict is a local bound once to a literal with constant
keys and every later store is ``losses["key"] = value`` with a constant key set once (a key
stored twice, in a loop with a variable key, ``update``, ``pop``, ``del``, a ``+=`` on an
entry, or the dict handed to a call before the sum: no fact, the sum is one term). ``sum([a,
b])`` of a list literal is its elements; ``sum(parts)`` or ``torch.stack(parts).mean()`` of a
local list bound once to a literal and then only appended to (``parts.append(term)``) is each
appended term, read at its ``append``.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope


def summed_entries(ctx: Context, scope: Scope, e: ast.expr, use: ast.stmt | None,
                   line: int) -> list[tuple[ast.expr, ast.stmt | None, int]] | None:
    """The entries ``sum(d.values())`` (or ``sum([a, b])``) adds, each with the statement and
    line it is read at, or None (NOTE [summed dict of terms])."""
    if isinstance(e, ast.Call) and not e.args and not e.keywords \
            and isinstance(e.func, ast.Attribute) and e.func.attr in ("sum", "mean") \
            and isinstance(e.func.value, ast.Call) and len(e.func.value.args) == 1 \
            and ctx.qualified_name(e.func.value.func) == "torch.stack":
        a = e.func.value.args[0]  # `torch.stack(parts).mean()`: a scaled sum of the parts
    elif isinstance(e, ast.Call) and len(e.args) == 1 and not e.keywords \
            and isinstance(e.func, ast.Name) and e.func.id == "sum" \
            and ctx.qualified_name(e.func) in (None, "sum", "builtins.sum"):
        a = e.args[0]
    else:
        return None
    if isinstance(a, ast.Name):
        return _appended(scope, a.id, line)
    if isinstance(a, ast.List) and a.elts and not any(isinstance(x, ast.Starred)
                                                      for x in a.elts):
        return [(x, use, line) for x in a.elts]
    if not (isinstance(a, ast.Call) and not a.args and isinstance(a.func, ast.Attribute)
            and a.func.attr == "values" and isinstance(a.func.value, ast.Name)):
        return None
    return _entries(scope, a.func.value.id, line)


def _entries(scope: Scope, name: str, line: int
             ) -> list[tuple[ast.expr, ast.stmt | None, int]] | None:
    made = [b for b in scope.bindings.get(name, []) if b.line < line]
    lits = [b for b in made if isinstance(b.stmt, ast.Assign) and b.value is not None]
    if len(lits) != 1 or not isinstance(lits[0].value, ast.Dict):
        return None
    lit = lits[0]
    d: ast.Dict = lit.value  # type: ignore[assignment]
    if any(not (isinstance(k, ast.Constant) and isinstance(k.value, str)) for k in d.keys):
        return None
    out: list[tuple[ast.expr, ast.stmt | None, int]] = [
        (v, lit.stmt, lit.line) for v in d.values]
    keys = {k.value for k in d.keys}  # type: ignore[union-attr]
    for s in scope.stmts:
        if s.lineno <= lit.line or s.lineno >= line:
            continue
        if isinstance(s, ast.Assign) and len(s.targets) == 1 \
                and isinstance(s.targets[0], ast.Subscript) \
                and isinstance(s.targets[0].value, ast.Name) and s.targets[0].value.id == name:
            k = s.targets[0].slice
            if not (isinstance(k, ast.Constant) and isinstance(k.value, str)) \
                    or k.value in keys:
                return None
            keys.add(k.value)
            out.append((s.value, s, s.lineno))
            continue
        if _touches(s, name):
            return None
    return out


def _appended(scope: Scope, name: str, line: int
              ) -> list[tuple[ast.expr, ast.stmt | None, int]] | None:
    """The elements of the list ``name`` bound once to a literal and then only appended to
    (``parts.append(term)``, each append one term, in a loop or not) before ``line``."""
    made = [b for b in scope.bindings.get(name, []) if b.line < line]
    if len(made) != 1 or not isinstance(made[0].value, ast.List) \
            or not isinstance(made[0].stmt, ast.Assign) \
            or any(isinstance(x, ast.Starred) for x in made[0].value.elts):
        return None
    lit = made[0]
    out: list[tuple[ast.expr, ast.stmt | None, int]] = [
        (x, lit.stmt, lit.line) for x in lit.value.elts]  # type: ignore[union-attr]
    for s in scope.stmts:
        if s.lineno <= lit.line or s.lineno >= line:
            continue
        c = s.value if isinstance(s, ast.Expr) else None
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) \
                and isinstance(c.func.value, ast.Name) and c.func.value.id == name:
            if c.func.attr != "append" or len(c.args) != 1 or c.keywords:
                return None
            out.append((c.args[0], s, s.lineno))
        elif _touches(s, name):
            return None
    return out or None


def _touches(s: ast.stmt, name: str) -> bool:
    """``s`` (not a plain store of one entry) may change the dict ``name``: it rebinds it,
    stores, deletes or augments an entry, calls a method of it or hands it to a call."""
    own = [s] if not hasattr(s, "body") else [  # a compound statement: its header only
        getattr(s, f) for f in ("test", "iter", "target") if getattr(s, f, None) is not None
    ] + [i.context_expr for i in getattr(s, "items", ())]
    return any(isinstance(n, ast.Name) and n.id == name  # any other mention before the
               for e in own for n in walk(e))  # sum: no fact (reads included)


# NOTE [a reduction keeps the terms]
# A mean or a sum is linear: ``(a + b.detach()).mean()`` is ``a.mean() + b.detach().mean()``,
# so the additive terms of the reduced tensor are terms of the reduced loss (``loss = kld +
# rec``, then ``loss.mean().backward()``: a VAE's per-sample loss reduced at the backward).
def reduced(e: ast.expr, ctx: Context) -> ast.expr | None:
    """The tensor the reduction ``e`` reads (``t.mean()``, ``t.sum(1)``, ``torch.mean(t)``,
    ``torch.sum(t, dim=0)``), or None (NOTE [a reduction keeps the terms])."""
    if not isinstance(e, ast.Call):
        return None
    if isinstance(e.func, ast.Attribute) and e.func.attr in ("mean", "sum") \
            and ctx.qualified_name(e.func) not in ("torch.mean", "torch.sum"):
        return e.func.value
    if e.args and ctx.qualified_name(e.func) in ("torch.mean", "torch.sum"):
        return e.args[0]
    return None
