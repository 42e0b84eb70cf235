"""The positions of a file's nodes by type, for :func:`gradtrace.lint.nodes.of_types`.

# NOTE [typed positions]
``of_types`` answers from the file's walk index (NOTE [walk index] in
:mod:`gradtrace.lint.nodes`): for each tuple of types it is asked, the positions in the walk
order of the nodes of those types, then a bisection per question. Finding those positions
with one pass over every node of the file per tuple cost ~10 ms per tuple at 20k lines (a
dozen tuples a file: 3% of the check of dense code). The nodes are grouped by their exact
type once per file (one pass); a tuple's positions are then the groups of the types that are
subclasses of it, merged in order: the same positions, in the same (ascending) order, at the
cost of the nodes found.
"""
from __future__ import annotations

import ast
from itertools import chain


def by_type(order: list[ast.AST]) -> dict[type, list[int]]:
    """Exact node type -> the ascending positions in ``order`` of its nodes (one pass)."""
    out: dict[type, list[int]] = {}
    get = out.get
    for i, t in enumerate(map(type, order)):
        at = get(t)
        if at is None:
            out[t] = [i]
        else:
            at.append(i)
    return out


def typed(groups: dict[type, list[int]], order: list[ast.AST], types: tuple[type, ...]
          ) -> tuple[list[int], list[ast.AST]]:
    """(the ascending positions of the nodes of ``order`` that are instances of ``types``,
    those nodes), from the ``groups`` of :func:`by_type` (NOTE [typed positions])."""
    lists = [at for t, at in groups.items() if issubclass(t, types)]
    if len(lists) == 1:
        pos = list(lists[0])
    else:  # runs, each ascending: one merge of the sorted runs
        pos = sorted(chain.from_iterable(lists))
    return pos, list(map(order.__getitem__, pos))
