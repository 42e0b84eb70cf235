"""Questions about one statement in its function: the default of an argument, the exit that
ends every path after a statement, a read inside the value of the assignment that binds it,
the iterable a loop target is drawn from, the slice writes of a scope, the counter of an
``enumerate`` comprehension (moved out of :mod:`gradtrace.lint.nodes`, whose
walks they do not use)."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from gradtrace.lint.nodes import _NESTED

if TYPE_CHECKING:
    from gradtrace.lint.flow import Scope


def argument_default(name: str, fn: ast.AST) -> ast.expr | None:
    """The default value of ``fn``'s argument ``name`` (None: not an argument with one)."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    a = fn.args
    pos = [*a.posonlyargs, *a.args]
    pairs = [*zip(pos[len(pos) - len(a.defaults):], a.defaults),
             *zip(a.kwonlyargs, a.kw_defaults)]
    return next((d for arg, d in pairs if arg.arg == name and d is not None), None)


def exit_after(fn: ast.AST, stmt: ast.stmt) -> int | None:
    """The line of a ``return`` or ``raise`` that ends every path from ``stmt`` through the
    blocks of ``fn`` around it (``if flag: finetune(model); return``): the statements after
    that block are never reached from ``stmt``. None when the flow may go on (no such exit,
    or a ``try`` with a ``finally`` or handlers in between, whose code may still run)."""
    return _exit_from(getattr(fn, "body", []), stmt)[1]


def _exit_from(body: list[ast.stmt], stmt: ast.stmt) -> tuple[bool, int | None]:
    """(``stmt`` is in ``body``'s blocks, :func:`exit_after`'s line for it there)."""
    for i, s in enumerate(body):
        if s is stmt:
            return True, _exit_in(body[i + 1:])
        if isinstance(s, _NESTED):
            continue
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            for sub in _blocks(getattr(s, field, None) or ()):
                found, line = _exit_from(sub, stmt)
                if found:
                    if isinstance(s, ast.Try) and (s.finalbody or s.handlers):
                        return True, None  # a finally or handler may still run
                    return True, line if line is not None else _exit_in(body[i + 1:])
    return False, None


def _blocks(sub: list[ast.AST] | tuple[()]) -> Iterator[list[ast.stmt]]:
    """The statement lists of a field: a body itself, or the bodies of handlers and cases."""
    if sub and isinstance(sub[0], ast.stmt):
        yield sub  # type: ignore[misc]
    else:
        for h in sub:
            yield getattr(h, "body", [])


def _exit_in(rest: list[ast.stmt]) -> int | None:
    """The line of the first ``return``/``raise`` among ``rest`` at this level."""
    return next((s.lineno for s in rest if isinstance(s, (ast.Return, ast.Raise))), None)


def always_jumps(s: ast.stmt) -> bool:
    """``s`` never lets the flow reach the next statement of its block: a ``return``,
    ``raise``, ``continue`` or ``break``, or an ``if`` with an ``else`` (or a ``with``) whose
    every arm holds such a statement at its own level (``if ckpt: ...; continue`` / ``else:
    raise``). A loop or ``try`` around a jump is not followed."""
    if isinstance(s, (ast.Return, ast.Raise, ast.Continue, ast.Break)):
        return True
    if isinstance(s, ast.If):
        return bool(s.orelse) and any(map(always_jumps, s.body)) \
            and any(map(always_jumps, s.orelse))
    if isinstance(s, (ast.With, ast.AsyncWith)):
        return any(map(always_jumps, s.body))
    return False


def inside_own_value(e: ast.AST, stmt: ast.stmt) -> bool:
    """``e`` is read in the value of the assignment ``stmt`` that spans several lines and
    binds it: Python evaluates the value first, so ``e`` is the binding before ``stmt``."""
    value = getattr(stmt, "value", None)
    if not isinstance(stmt, (ast.Assign, ast.AnnAssign)) or value is None \
            or (stmt.end_lineno or stmt.lineno) == stmt.lineno:
        return False
    pos = (getattr(e, "lineno", 0), getattr(e, "col_offset", 0))
    return (value.lineno, value.col_offset) <= pos <= (
        value.end_lineno or value.lineno, value.end_col_offset or 0)


def drawn_from(loop: ast.For | ast.AsyncFor, name: str) -> ast.expr:
    """The iterable a loop target ``name`` is drawn from: in ``for i, q, (p, r) in zip(range(n),
    qs, rets)`` ``p`` comes from ``rets``; in ``for i, x in enumerate(xs)`` ``x`` from ``xs``.
    The whole ``loop.iter`` when the target does not split so."""
    it, target = loop.iter, loop.target
    while isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and not any(
            isinstance(a, ast.Starred) for a in it.args) and isinstance(target, ast.Tuple) \
            and not any(isinstance(t, ast.Starred) for t in target.elts):
        if it.func.id == "zip" and len(it.args) == len(target.elts) and len(it.args) > 1:
            parts = list(zip(target.elts, it.args))
        elif it.func.id == "enumerate" and len(it.args) == 1 and len(target.elts) == 2:
            parts = [(target.elts[1], it.args[0])]
        else:
            break
        hit = next(((t, a) for t, a in parts if any(
            isinstance(n, ast.Name) and n.id == name for n in ast.walk(t))), None)
        if hit is None:
            break
        target, it = hit
    return it


def slice_writes(scope: Scope) -> dict[str, list[ast.Assign]]:
    """The statements ``name[...] = value`` of a scope, by ``name``."""
    out: dict[str, list[ast.Assign]] = {}
    for s in scope.stmts:
        if isinstance(s, ast.Assign):
            for t in s.targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                    out.setdefault(t.value.id, []).append(s)
    return out


def comprehension_counter(g: ast.comprehension, name: str) -> bool:
    """``name`` is the count of ``for name, x in enumerate(xs)``: an int, no tensor."""
    it, t = g.iter, g.target
    return isinstance(it, ast.Call) and isinstance(it.func, ast.Name) \
        and it.func.id == "enumerate" and isinstance(t, ast.Tuple) and len(t.elts) == 2 \
        and isinstance(t.elts[0], ast.Name) and t.elts[0].id == name
