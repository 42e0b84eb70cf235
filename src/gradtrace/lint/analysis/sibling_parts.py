"""Which submodules held on ``self`` a method sets ``requires_grad`` on, and to what.

# NOTE [flags on parts]
For GT136 (a freeze method copied from its sibling): in one method of a module class, the
statements that set one constant ``requires_grad`` on every parameter of ``self.<part>``:
- ``self.<part>.requires_grad_(False)``;
- ``for p in self.<part>.parameters(): p.requires_grad = False`` (or ``p.requires_grad_(...)``);
- a call handing ``self.<part>`` to a function of the file (or a method of the class) that does
  one of the above to that parameter (TerraTorch's ``freeze_module(self.encoder)``).
Only statements at the method's top level (not under a branch or a loop of its own) count.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

Flags = dict[str, list[tuple[ast.stmt, bool]]]


def part_flags(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Flags:
    """``part -> [(statement, value)]`` for the method ``fn`` (NOTE [flags on parts])."""
    return ctx.memo("part-flags", fn, lambda: _part_flags(ctx, fn))


def _part_flags(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Flags:
    out: Flags = {}
    for s in fn.body:
        for part, value in _stmt_flags(ctx, fn, s):
            out.setdefault(part, []).append((s, value))
    return out


def _self_part(e: ast.expr) -> str | None:
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
        return e.attr
    return None


def _stmt_flags(ctx: Context, fn: ast.AST, s: ast.stmt) -> list[tuple[str, bool]]:
    direct = _sets(s, _self_part)
    if direct is not None:
        return [direct]
    if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)):
        return []
    call = s.value
    callee = _callee(ctx, fn, call.func)
    if callee is None:
        return []
    pos = [a.arg for a in (*callee.args.posonlyargs, *callee.args.args)]
    if isinstance(call.func, ast.Attribute) and pos and pos[0] == "self":
        pos = pos[1:]
    if any(isinstance(a, ast.Starred) for a in call.args):
        return []
    bound = {name: arg for name, arg in zip(pos, call.args)}
    bound.update({k.arg: k.value for k in call.keywords if k.arg})
    out = []
    for name, arg in bound.items():
        part = _self_part(arg)
        if part is None:
            continue
        got = next((g for b in callee.body if (g := _sets(b, lambda e, n=name: (
            n if isinstance(e, ast.Name) and e.id == n else None))) is not None), None)
        if got is not None:
            out.append((part, got[1]))
    return out


def _callee(ctx: Context, fn: ast.AST, f: ast.expr) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    if isinstance(f, ast.Name):
        return ctx.analysis.functions.get(f.id)
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
        cls = ctx.analysis.class_of(fn)
        return cls.method(f.attr) if cls is not None else None
    return None


def _sets(s: ast.stmt, owner) -> tuple[str, bool] | None:  # type: ignore[no-untyped-def]
    """(the module ``owner`` reads, value) when ``s`` sets one constant flag on all of it."""
    if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
        f = s.value.func
        if isinstance(f, ast.Attribute) and f.attr == "requires_grad_":
            who = owner(f.value)
            value = _const(s.value.args[0]) if s.value.args else True
            if who is not None and value is not None:
                return who, value
        return None
    body = [x for x in getattr(s, "body", ()) if not (  # a string statement is no code
        isinstance(x, ast.Expr) and isinstance(x.value, ast.Constant))]
    if not (isinstance(s, (ast.For, ast.AsyncFor)) and isinstance(s.target, ast.Name)
            and isinstance(s.iter, ast.Call) and isinstance(s.iter.func, ast.Attribute)
            and s.iter.func.attr == "parameters" and len(body) == 1):
        return None
    who = owner(s.iter.func.value)
    if who is None:
        return None
    p, b = s.target.id, body[0]
    value = None
    if isinstance(b, ast.Assign) and len(b.targets) == 1 and isinstance(b.targets[0], ast.Attribute) \
            and b.targets[0].attr == "requires_grad" and isinstance(b.targets[0].value, ast.Name) \
            and b.targets[0].value.id == p:
        value = _const(b.value)
    elif isinstance(b, ast.Expr) and isinstance(b.value, ast.Call) \
            and isinstance(b.value.func, ast.Attribute) and b.value.func.attr == "requires_grad_" \
            and isinstance(b.value.func.value, ast.Name) and b.value.func.value.id == p:
        value = _const(b.value.args[0]) if b.value.args else True
    return (who, value) if value is not None else None


def _const(e: ast.expr) -> bool | None:
    return e.value if isinstance(e, ast.Constant) and isinstance(e.value, bool) else None
