"""Which functions a rule with ``function_requires`` may find something in.

# NOTE [function requires]
A rule's trigger words say where it looks; many rules also need a second thing in the same
function before they can fire (GT608: an in-place write, and a split/chunk/unbind call or a
``for`` statement that made the view it writes). ``Rule.function_requires`` lists the words
of that second thing: the rule promises to find nothing outside a function, nor in a function
(decorators included) whose code holds none of them. The engine then keeps of the rule's
trigger lines only those inside an outermost function holding one (an outermost one: a nested
function lies inside it, so the test may say yes too often, never no), and a rule left with no
line is not active in the file: it is not visited, and its words open no subtree
(NOTE [quiet subtrees]); outside functions its statement visitors are not called, and its
words do not open the statements there as those of other ``gate_statements = "function"``
rules do (NOTE [triggers]). The words are found with the trigger words (NOTE [token lines]), as
substrings of the code, except that a Python keyword (``for``) is found as a whole word
(``for`` is in every ``def forward``); a local alias of an imported name holding one
(``from torch import chunk as ck``) counts, as for the triggers (NOTE [triggers]: imports at
the top of the file).
"""
from __future__ import annotations

import ast
import bisect
import keyword
from functools import lru_cache
from typing import TYPE_CHECKING, Callable

from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.words import holds

if TYPE_CHECKING:
    from gradtrace.lint.rule import Rule

_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")
# the node types with one of those fields (a class, an `if`, a handler, a match case...)
_HOLDERS = frozenset(t for t in vars(ast).values() if isinstance(t, type)
                     and issubclass(t, ast.AST) and not issubclass(t, ast.expr)
                     and set(_BODIES).intersection(t._fields))


@lru_cache(maxsize=16)
def required_words(rules: tuple[type[Rule], ...]) -> tuple[frozenset[str], frozenset[str]]:
    """(the substring words, the keywords) of the ``function_requires`` of ``rules``."""
    words = {w for r in rules for w in r.function_requires}
    keys = frozenset(w for w in words if keyword.iskeyword(w))
    return frozenset(words - keys), keys


def add_aliases(aliases: dict[str, set[str]], imported: dict[str, str],
                words: frozenset[str]) -> None:
    """Add to the engine's ``aliases`` (local name -> the words its imported name holds) the
    local names of imported names holding one of ``words`` (``ck`` for ``torch.chunk``)."""
    for local, qual in imported.items() if words else ():
        inside = {w for w in words if w in qual}
        if inside and local not in aliases and local != qual.rpartition(".")[2]:
            aliases[local] = inside


def outer_functions(tree: ast.Module) -> list[tuple[int, int]]:
    """(first line, decorators included; last line) of each function that no other function
    holds, in source order (they do not overlap)."""
    out: list[tuple[int, int]] = []
    todo: list[ast.AST] = [tree]
    while todo:
        n = todo.pop()
        for field in _BODIES:
            for s in reversed(getattr(n, field, None) or ()):
                if isinstance(s, FUNCTION_TYPES):
                    first = min([s.lineno, *(d.lineno for d in s.decorator_list)])
                    out.append((first, s.end_lineno or s.lineno))
                elif s.__class__ in _HOLDERS:  # a statement without a body holds no def
                    todo.append(s)
    out.sort()
    return out


def allowed(tree: ast.Module, required: list[int]) -> list[tuple[int, int]]:
    """The outermost functions whose lines hold one of the sorted ``required`` lines."""
    return [(a, b) for a, b in outer_functions(tree) if holds(required, a, b)]


def restrict(lines: set[int], spans: list[tuple[int, int]]) -> set[int]:
    """The ``lines`` that lie in one of the sorted, disjoint ``spans``."""
    starts = [a for a, _ in spans]
    out = set()
    for line in lines:
        k = bisect.bisect_right(starts, line) - 1
        if k >= 0 and line <= spans[k][1]:
            out.add(line)
    return out


def restricted(tree: ast.Module, rule: Rule, found: list[str], key: tuple[str, ...],
               word_lines: dict[str, set[int]], found_in: Callable[[tuple[str, ...]], list[str]]
               ) -> tuple[list[str], tuple[str, ...]]:
    """The engine's ``found`` and ``key`` words of ``rule`` (NOTE [triggers]) as words whose
    lines (added to ``word_lines``) are theirs in the functions that hold one of the rule's
    ``function_requires``; words left with no line are dropped."""
    need = sorted(set().union(*(word_lines[w] for w in found_in(rule.function_requires))))
    spans = allowed(tree, need) if need else []
    out: tuple[list[str], list[str]] = ([], [])
    for words, into in ((found, out[0]), (key, out[1])):
        for w in words:
            tag = f"{w}\0{','.join(rule.function_requires)}"
            if tag not in word_lines:
                word_lines[tag] = restrict(word_lines[w], spans)
            if word_lines[tag]:
                into.append(tag)
    return out[0], tuple(out[1])
