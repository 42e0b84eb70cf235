"""The file's calls and names, indexed in one pass once a file asks about many names.

# NOTE [call index]
"Who calls ``name``" is asked per name (:func:`~gradtrace.lint.analysis.calls.call_sites`, the
parameter kinds' ``_uses``), each answer a pass over the statements whose lines name it
(NOTE [call sites]). Library code asks about one or two names per file, and those passes are
cheaper than any index of the whole file (one pass over every node of a transformers file costs
more than all its call look-ups together: docs/triage/speed33.md). Dense code asks about
hundreds (a 5,000-line training script: ~230 names), each pass reading again the statements of
the names before it. So the first :data:`INDEX_AFTER` names a file asks are answered as before;
the next builds, in one pass over every statement's own expressions in source pre-order (the
order each per-name pass keeps), every call under its callee's name (``name(...)``) or
attribute tail (``x.name(...)``), the names read as a value (not called, nor handed to a type
check), and the attributes read on ``self``; every later name is a look-up. The answers are the
per-name passes' own, in their order: a name's statements are a subset of all statements in
the same order, and what each statement contributes does not depend on the name asked.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from gradtrace.lint.nodes import child_fields, children

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

INDEX_AFTER = 16  # names asked one by one in a file before its calls are indexed
BODY_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")
TYPE_CHECKS = frozenset({"isinstance", "issubclass", "type", "super"})  # no escape
_FIELDS: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}
_REVERSED: dict[type, tuple[str, ...]] = {}  # child_fields, last first (pushed on a stack)

Site = tuple[ast.Call, ast.AST, tuple[ast.AST, ...]]  # call, statement, enclosing statements


def statement_fields(t: type) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(body fields, own-expression fields) of a statement type, in field order."""
    got = _FIELDS.get(t)
    if got is None:
        fs = child_fields(t)
        got = _FIELDS[t] = (tuple(f for f in fs if f in BODY_FIELDS),
                            tuple(f for f in fs if f not in BODY_FIELDS))
    return got


def own_nodes(s: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a statement's own expressions (not its body statements), in pre-order."""
    for f in statement_fields(type(s))[1]:
        v = getattr(s, f, None)
        for root in (v if v.__class__ is list else (v,)):
            if not isinstance(root, ast.AST):
                continue
            stack = [root]
            while stack:
                n = stack.pop()
                yield n
                stack.extend(reversed(list(children(n))))


def every_statement(tree: ast.Module) -> Iterator[tuple[ast.AST, tuple[ast.AST, ...]]]:
    """(statement, its enclosing statements, outermost first) for every statement, handler
    and match case of ``tree``, in source pre-order."""
    todo: list[tuple[ast.AST, tuple[ast.AST, ...]]] = [(s, ()) for s in reversed(tree.body)]
    while todo:
        s, outer = todo.pop()
        yield s, outer
        inner = outer + (s,)
        for f in reversed(statement_fields(type(s))[0]):
            todo.extend((c, inner) for c in reversed(getattr(s, f)))


class CallIndex:
    """The file's calls by callee name, its names read as values, its ``self`` attributes
    read (NOTE [call index])."""

    __slots__ = ("calls", "named", "self_refs")

    def __init__(self, tree: ast.Module) -> None:
        calls: dict[str, list[Site]] = {}
        named: set[str] = set()
        self_refs: set[str] = set()
        Call, Name, Attribute, Load, AST = ast.Call, ast.Name, ast.Attribute, ast.Load, ast.AST
        rev = _REVERSED.get
        for s, outer in every_statement(tree):
            plain: set[int] = set()  # called names, and the arguments of type checks
            # own_nodes(s), inline: pre-order, a call before its parts
            stack: list = []
            for f in reversed(statement_fields(s.__class__)[1]):
                v = getattr(s, f, None)
                if v.__class__ is list:
                    stack.extend(x for x in reversed(v) if isinstance(x, AST))
                elif isinstance(v, AST):
                    stack.append(v)
            pop, push = stack.pop, stack.append
            while stack:
                n = pop()
                cls = n.__class__
                fs = rev(cls)
                if fs is None:
                    fs = _REVERSED[cls] = tuple(reversed(child_fields(cls)))
                for f in fs:
                    v = getattr(n, f, None)
                    if v is None:
                        continue
                    if v.__class__ is list:
                        for x in reversed(v):
                            if isinstance(x, AST):
                                push(x)
                    elif isinstance(v, AST):
                        push(v)
                if cls is Call:
                    f = n.func
                    fc = f.__class__
                    if fc is Name:
                        calls.setdefault(f.id, []).append((n, s, outer))
                        if f.id in TYPE_CHECKS:
                            plain.update(id(x) for x in n.args)
                    elif fc is Attribute:
                        calls.setdefault(f.attr, []).append((n, s, outer))
                    plain.add(id(f))
                elif cls is Name:
                    if n.ctx.__class__ is Load and id(n) not in plain:
                        named.add(n.id)
                elif cls is Attribute:  # `dotted(n.value) == "self"`: only a Name spells it
                    v = n.value
                    if v.__class__ is Name and v.id == "self" and id(n) not in plain:
                        self_refs.add(n.attr)
        self.calls, self.named, self.self_refs = calls, named, self_refs


def call_index(ctx: Context, name: str) -> CallIndex | None:
    """The file's :class:`CallIndex` once it has been asked about more than
    :data:`INDEX_AFTER` distinct names (``name`` is counted here), else None: answer the name
    by its own pass."""
    state: list = ctx.memo("call-index", ctx.tree, lambda: [set(), None])
    if state[1] is None:
        state[0].add(name)
        if len(state[0]) <= INDEX_AFTER:
            return None
        state[1] = CallIndex(ctx.tree)  # type: ignore[arg-type]
    return state[1]
