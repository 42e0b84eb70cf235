"""Where the file names something: the lines of a word in the code, and the statements there.

# NOTE [call sites]
"Who calls ``train``", "where is ``Encoder`` built": walking the whole tree once per file (or,
worse, per node) to answer costs more than parsing the file. The name must be written where it
is used, so :func:`word_lines` finds its lines in the code (no comments nor strings:
NOTE [code text]) with one ``str.find`` scan, and :func:`statements_on` reaches the statements
holding those lines through the bodies that hold them, not through the rest of the tree. A
call ``name(...)`` lies in the own expressions (not the body) of a statement whose lines hold
``name``, so walking those expressions finds every such call. An identifier written with
characters that Python normalises (NFKC) may differ from its spelling: when the code is not
ASCII, callers fall back to the whole tree (:func:`ascii_code`).
"""
from __future__ import annotations

import ast
import bisect
import re
from typing import TYPE_CHECKING, Iterable, Iterator

from gradtrace.lint.code_text import LINE_END, line_starts
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.nodes import child_fields, children
from gradtrace.lint.words import holds as _holds

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

BODY_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")
_FIELDS: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}


def _fields(t: type) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(body fields, own-expression fields) of a statement type, in field order."""
    got = _FIELDS.get(t)
    if got is None:
        fs = child_fields(t)
        got = _FIELDS[t] = (tuple(f for f in fs if f in BODY_FIELDS),
                            tuple(f for f in fs if f not in BODY_FIELDS))
    return got


def ascii_code(ctx: Context) -> bool:
    """Whether the code (strings and comments out) is ASCII: its names are spelled as parsed."""
    return ctx.memo("calls-ascii", ctx.tree, ctx.code.isascii)


FIND_LIMIT = 32  # names searched one by one in a file before its words are indexed


def word_index(ctx: Context) -> dict[str, list[int]]:
    """Every word of the code -> the offsets where it occurs (one pass, built on demand)."""
    def make() -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for m in _WORD.finditer(ctx.code):
            out.setdefault(m.group(), []).append(m.start())
        return out
    return ctx.memo("calls-word-index", ctx.tree, make)


_WORD = re.compile(r"\w+")


def word_lines(ctx: Context, names: Iterable[str]) -> list[int]:
    """The sorted 1-based lines where one of ``names`` occurs as a whole word in the code.

    A few names are found with ``str.find``; past :data:`FIND_LIMIT` names in one file (a
    long script asks about hundreds of classes and functions, each search a scan of the
    whole text) the code's words are indexed once."""
    code = ctx.code
    names = list(names)
    searched: list[int] = ctx.memo("calls-searched", ctx.tree, lambda: [0])
    searched[0] += len(names)
    if searched[0] > FIND_LIMIT:
        index = word_index(ctx)
        starts = ctx.memo("calls-line-starts", ctx.tree, lambda: [0] + [
            m.end() for m in LINE_END.finditer(code)])
        return sorted({bisect.bisect_right(starts, p) for name in names
                       for p in index.get(name, ())})
    at = []
    for name in names:
        if not ctx.mentions(name):  # absent: no scan for whole words; the prefilter of
            continue  # NOTE [identifier prefilter] only once something else has built it
        n = len(name)
        pos = code.find(name)
        while pos != -1:
            end = pos + n
            if (pos == 0 or not (code[pos - 1].isalnum() or code[pos - 1] == "_")) and \
                    (end == len(code) or not (code[end].isalnum() or code[end] == "_")):
                at.append(pos)
            pos = code.find(name, end)
    return _lines_of(ctx, at)


def _lines_of(ctx: Context, at: list[int]) -> list[int]:
    """The sorted distinct 1-based lines of the offsets ``at`` of the code: a bisection of
    the file's line starts (built once per file, and by most files' rules anyway) per offset,
    where counting the line breaks before each read the file up to its last offset per ask."""
    if not at:
        return []
    starts = line_starts(ctx)  # [0, 0, start of line 2, ...]
    return sorted({bisect.bisect_right(starts, p) - 1 for p in at})


def span(s: ast.AST) -> tuple[int, int]:
    """First (decorators included) and last line of a statement, handler or match case."""
    first = getattr(s, "lineno", None)
    if first is None:  # a match case
        return s.pattern.lineno, s.body[-1].end_lineno  # type: ignore[attr-defined]
    for d in getattr(s, "decorator_list", ()):
        first = min(first, d.lineno)
    return first, s.end_lineno  # type: ignore[attr-defined]


def statements_on(ctx: Context, lines: list[int]
                  ) -> Iterator[tuple[ast.AST, tuple[ast.AST, ...]]]:
    """(statement, its enclosing statements, outermost first) for every statement (handler,
    match case) whose own expressions may lie on one of the sorted ``lines``, in source
    pre-order: its header lines (from its first line to the line its body starts on) or, for
    a simple statement, all its lines hold one."""
    if not lines:
        return
    todo: list[tuple[ast.AST, tuple[ast.AST, ...]]] = [
        (s, ()) for s in reversed(holding(ctx, ctx.tree, "body", lines))]
    while todo:
        s, outer = todo.pop()
        first, _ = span(s)
        bodies = _fields(type(s))[0]
        if not bodies:
            yield s, outer
            continue
        head = getattr(s, bodies[0])
        if not head or _holds(lines, first, span(head[0])[0]):
            yield s, outer
        inner = outer + (s,)
        for f in reversed(bodies):
            todo.extend((c, inner) for c in reversed(holding(ctx, s, f, lines)))


def holding(ctx: Context, parent: ast.AST, field: str, lines: list[int]) -> list[ast.AST]:
    """The statements of ``parent.<field>`` (a body, handlers, cases) whose lines hold one of
    the sorted ``lines``, in order: found by bisection, not by a scan of the body (a
    script's module body holds thousands of statements)."""
    body = getattr(parent, field)
    if not body:
        return []
    spans: list[tuple[int, int]] = ctx.memo("calls-spans:" + field, parent,
                                            lambda: [span(x) for x in body])
    starts: list[int] = ctx.memo("calls-starts:" + field, parent,
                                 lambda: [a for a, _ in spans])
    lo = bisect.bisect_left(lines, starts[0])
    hi = bisect.bisect_right(lines, spans[-1][1])
    picked: set[int] = set()
    for line in lines[lo:hi]:
        k = bisect.bisect_right(starts, line) - 1
        while k >= 0 and spans[k][1] >= line and k not in picked:
            picked.add(k)
            k -= 1
    return [body[k] for k in sorted(picked)]


def own_nodes(s: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a statement's own expressions (not its body statements), in pre-order."""
    for f in _fields(type(s))[1]:
        v = getattr(s, f, None)
        for root in (v if v.__class__ is list else (v,)):
            if not isinstance(root, ast.AST):
                continue
            stack = [root]
            while stack:
                n = stack.pop()
                yield n
                stack.extend(reversed(list(children(n))))


def calls_of(ctx: Context, names: Iterable[str]
             ) -> list[tuple[ast.Call, ast.AST, ast.AST | None]]:
    """(call, statement, enclosing function or None) for every call ``name(...)`` of one of
    ``names`` (a plain name as the called function), in the order the engine visits them.
    The function is the innermost one around the statement (a def's own header belongs to
    the function around the def), as ``ctx.function`` says while the engine visits it."""
    wanted = frozenset(names)
    if not wanted:
        return []
    out = []
    if ascii_code(ctx):
        found: Iterable[tuple[ast.AST, tuple[ast.AST, ...]]] = statements_on(
            ctx, word_lines(ctx, sorted(wanted)))
    else:
        found = _every_statement(ctx)  # NOTE [call sites]
    for s, outer in found:
        for n in own_nodes(s):
            if n.__class__ is ast.Call and n.func.__class__ is ast.Name \
                    and n.func.id in wanted:  # type: ignore[attr-defined]
                fn = next((o for o in reversed(outer) if isinstance(o, FUNCTION_TYPES)), None)
                out.append((n, s, fn))
    return out


def _every_statement(ctx: Context) -> Iterator[tuple[ast.AST, tuple[ast.AST, ...]]]:
    todo: list[tuple[ast.AST, tuple[ast.AST, ...]]] = [
        (s, ()) for s in reversed(ctx.tree.body)]
    while todo:
        s, outer = todo.pop()
        yield s, outer
        inner = outer + (s,)
        for f in reversed(_fields(type(s))[0]):
            todo.extend((c, inner) for c in reversed(getattr(s, f)))


def call_sites(ctx: Context, name: str
               ) -> list[tuple[ast.Call, ast.AST, tuple[ast.AST, ...]]]:
    """(call, statement, enclosing statements) for every call of ``name(...)`` or
    ``<anything>.name(...)`` in the file, in source pre-order (cached per name)."""
    def make() -> list[tuple[ast.Call, ast.AST, tuple[ast.AST, ...]]]:
        found = statements_on(ctx, word_lines(ctx, (name,))) if ascii_code(ctx) \
            else _every_statement(ctx)
        out = []
        for s, outer in found:
            for n in own_nodes(s):
                if n.__class__ is ast.Call:
                    f = n.func  # type: ignore[attr-defined]
                    if (f.__class__ is ast.Name and f.id == name) or (
                            f.__class__ is ast.Attribute and f.attr == name):
                        out.append((n, s, outer))
        return out
    return ctx.memo("calls-sites:" + name, ctx.tree, make)  # type: ignore[return-value]


_STATEMENTS = (ast.stmt, ast.excepthandler, ast.match_case, ast.Module)


def named_calls(ctx: Context, name: str) -> list[tuple[ast.Call, ast.AST]]:
    """(call, enclosing function or module) for every call ``name(...)`` (a plain name as
    the called function), in the order of a walk of the whole tree with a stack (each call
    taken when its parent is: :func:`calls_by_name`), but
    through the statements whose lines hold ``name`` only (NOTE [call sites]: the others
    hold no such call, and leaving them out keeps the order of the rest). ASCII code only."""
    lines = word_lines(ctx, (name,))
    out: list[tuple[ast.Call, ast.AST]] = []
    if not lines:
        return out
    stack: list[tuple[ast.AST, ast.AST]] = [(ctx.tree, ctx.tree)]
    pop, push = stack.pop, stack.append
    while stack:
        node, where = pop()
        statement = isinstance(node, _STATEMENTS)
        for f in child_fields(node.__class__):
            v = getattr(node, f, None)
            if statement and f in BODY_FIELDS:
                v = holding(ctx, node, f, lines) if v else []
            for child in (v if v.__class__ is list else (v,)):
                if not isinstance(child, ast.AST):
                    continue
                if isinstance(child, ast.Call) and isinstance(child.func, ast.Name) \
                        and child.func.id == name:
                    out.append((child, where))  # type: ignore[arg-type]
                push((child, child if isinstance(child, FUNCTION_TYPES) else where))
    return out


def calls_by_name(tree: ast.Module) -> dict[str, list[tuple[ast.Call, ast.AST]]]:
    """``{name: [(call, enclosing function or module), ...]}`` for every call ``name(...)``.

    The order is that of a walk with a stack of ``ast.iter_child_nodes`` (rules read the
    first call sites first); the ``ctx``/``op`` leaves it skips hold no call (2x faster)."""
    out: dict[str, list[tuple[ast.Call, ast.AST]]] = {}
    stack: list[tuple[ast.AST, ast.AST]] = [(tree, tree)]
    pop, push = stack.pop, stack.append
    while stack:
        node, where = pop()
        for f in child_fields(node.__class__):
            v = getattr(node, f, None)
            for child in (v if v.__class__ is list else (v,)):
                if not isinstance(child, ast.AST):
                    continue
                if isinstance(child, ast.Call) and isinstance(child.func, ast.Name):
                    out.setdefault(child.func.id, []).append((child, where))
                push((child, child if isinstance(child, FUNCTION_TYPES) else where))
    return out
