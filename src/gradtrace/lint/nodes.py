"""A faster ``ast.walk``: about 2x, by skipping the ``ctx``/``op`` leaves no rule looks at.

Use :func:`walk` instead of :func:`ast.walk` in rules and analyses: the checker's budget is
close to the cost of ``ast.parse`` itself.
"""
from __future__ import annotations

import ast
from typing import Iterator

_FIELDS: dict[type, tuple[str, ...]] = {}
_AST = ast.AST


def child_fields(t: type) -> tuple[str, ...]:
    """The fields of node type ``t`` that can hold child nodes (``ctx``/``op`` excluded)."""
    fs = _FIELDS.get(t)
    if fs is None:
        fs = _FIELDS[t] = tuple(f for f in t._fields if f not in ("ctx", "op"))  # type: ignore[attr-defined]
    return fs


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """Every node under ``node`` (itself included), in no particular order."""
    stack = [node]
    pop, push = stack.pop, stack.append
    while stack:
        n = pop()
        yield n
        for f in child_fields(n.__class__):
            v = getattr(n, f, None)
            if v is None:
                continue
            if v.__class__ is list:
                for x in v:
                    if isinstance(x, _AST):
                        push(x)
            elif isinstance(v, _AST):
                push(v)


def children(node: ast.AST) -> Iterator[ast.AST]:
    """Direct child nodes of ``node`` (``ctx``/``op`` excluded), in field order."""
    for f in child_fields(node.__class__):
        v = getattr(node, f, None)
        if v is None:
            continue
        if v.__class__ is list:
            for x in v:
                if isinstance(x, _AST):
                    yield x
        elif isinstance(v, _AST):
            yield v


def statements(node: ast.AST) -> Iterator[ast.stmt]:
    """Every statement nested in ``node`` (bodies only, no expressions: cheaper than ast.walk)."""
    stack = [node]
    while stack:
        n = stack.pop()
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            sub = getattr(n, field, None)
            if sub:
                stack.extend(reversed(sub))
        if isinstance(n, ast.stmt):
            yield n
