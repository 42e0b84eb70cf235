"""What the engine's walk knows of a node type (its shape), of a rule (its ``visit_<Node>``
methods), and the keywords a statement of each type spells.

# NOTE [keyword lines]
An active rule with ``gate_statements = False`` must see every statement of the types it
visits (``visit_ClassDef``, ``visit_For``), but not the others: a statement of such a type
spells its keyword (``class``, ``for``, ``def``, ``with``) on a line inside its own lines, so
the lines holding that keyword as a whole word of the code join the engine's hit lines, and a
subtree whose lines hold none holds no such statement and stays skipped
(NOTE [quiet subtrees] in :mod:`gradtrace.lint.engine`). Only statement types without a
keyword here (``Assign``, ``Expr``, ...) still turn the skipping off for the file. A keyword
that is also a trigger word (``def``, ``class``) is found as a substring there: more lines,
never fewer. An augmented assignment (``x /= n``) spells its operator, one token of the code
on one of its own lines: the operators are found as substrings of the code (``/=`` inside
``//=``, ``<=`` of ``<<=`` not needed: ``<<=`` is looked for itself).
"""
from __future__ import annotations

import ast
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple

from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.nodes import BODY_FIELDS, child_fields

if TYPE_CHECKING:
    from gradtrace.lint.rule import Rule

class Shape(NamedTuple):
    """What the walker needs to know about a statement type, computed once per type."""

    is_def: bool
    is_class: bool
    is_with: bool
    is_import: bool
    bodies: tuple[str, ...]   # fields holding statement lists
    headers: tuple[str, ...]  # fields holding expressions


@lru_cache(maxsize=None)
def shape(t: type) -> Shape:
    fields = child_fields(t)
    return Shape(
        is_def=issubclass(t, FUNCTION_TYPES), is_class=issubclass(t, ast.ClassDef),
        is_with=issubclass(t, (ast.With, ast.AsyncWith)),
        is_import=issubclass(t, (ast.Import, ast.ImportFrom)),
        bodies=tuple(f for f in fields if f in BODY_FIELDS),
        headers=tuple(f for f in fields if f not in BODY_FIELDS))


@lru_cache(maxsize=None)
def reversed_fields(t: type) -> tuple[str, ...]:
    return child_fields(t)[::-1]


# the keywords a statement of each type spells on one of its own lines (an `elif` is an If)
KEYWORDS: dict[type, tuple[str, ...]] = {
    ast.ClassDef: ("class",), ast.FunctionDef: ("def",), ast.AsyncFunctionDef: ("def",),
    ast.For: ("for",), ast.AsyncFor: ("for",), ast.While: ("while",),
    ast.With: ("with",), ast.AsyncWith: ("with",), ast.If: ("if", "elif"),
    ast.Return: ("return",), ast.Raise: ("raise",), ast.Delete: ("del",),
    # an augmented assignment spells its operator, one token (`//=` holds `/=`, `**=` `*=`)
    ast.AugAssign: ("+=", "-=", "*=", "/=", "%=", "@=", "&=", "|=", "^=", "<<=", ">>="),
}


@lru_cache(maxsize=None)
def visitor_names(cls: type[Rule]) -> tuple[tuple[type, str, bool], ...]:
    """(node type, method name, is a statement visitor) for each ``visit_<Node>`` of a rule."""
    out = []
    for attr in dir(cls):
        if attr.startswith("visit_"):
            node_type = getattr(ast, attr[6:], None)
            if isinstance(node_type, type) and issubclass(node_type, ast.AST):
                out.append((node_type, attr, _is_stmt_type(node_type)))
    return tuple(out)


def _is_stmt_type(t: type) -> bool:
    return issubclass(t, (ast.stmt, ast.Module, ast.excepthandler, ast.match_case))


@lru_cache(maxsize=16)
def walk_keys(rules: tuple[type[Rule], ...]) -> frozenset[str]:
    """The keywords of the statement types that rules with ``gate_statements = False`` visit
    (NOTE [keyword lines]): looked for as whole words of the code (an operator, such as
    ``+=``, as a substring: :func:`spelt`)."""
    return frozenset(k for r in rules if r.gate_statements is False
                     for t, _, is_stmt in visitor_names(r) if is_stmt
                     for k in KEYWORDS.get(t, ()))


@lru_cache(maxsize=16)
def by_trigger(rules: tuple[type[Rule], ...]) -> dict[str, tuple[int, ...]]:
    """Trigger word -> the positions in ``rules`` of the rules it is a trigger of."""
    out: dict[str, list[int]] = {}
    for j, r in enumerate(rules):
        for w in r.triggers:
            out.setdefault(w, []).append(j)
    return {w: tuple(js) for w, js in out.items()}


@lru_cache(maxsize=16)
def spelt(keys: frozenset[str]) -> frozenset[str]:
    """The ``keys`` that are operators, not words: found as substrings of the code."""
    return frozenset(k for k in keys if not k.isidentifier())
