"""What a comprehension's value is computed from (for :func:`._deps.loads`)."""
from __future__ import annotations

import ast
from typing import Callable, Iterator

from gradtrace.lint.nodes import bfs_walk

COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


def comprehension_loads(n: ast.AST, loads: Callable[[ast.AST], Iterator[tuple[str, ast.AST]]]
                        ) -> Iterator[tuple[str, ast.AST]]:
    """``tuple(x.detach() for x in parts)``: what is iterated flows into the result only when
    the element reads a loop variable outside a detaching call (``loads`` walks one
    expression, cuts excluded); the loop variables are not names of the enclosing function."""
    gens = n.generators  # type: ignore[attr-defined]
    own = {t.id for g in gens for t in bfs_walk(g.target) if isinstance(t, ast.Name)}
    elts = [n.key, n.value] if isinstance(n, ast.DictComp) else [n.elt]  # type: ignore[attr-defined]
    flows = False
    for e in elts:
        for d, node in loads(e):
            if d.partition(".")[0] in own:
                flows = True
            else:
                yield d, node
    if flows:
        for g in gens:
            yield from ((d, node) for d, node in loads(g.iter) if d.partition(".")[0] not in own)
