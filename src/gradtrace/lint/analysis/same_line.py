"""Statements joined on one line with ``;``.

# NOTE [bound earlier on the same line]
The binding lookups are by line (:meth:`Scope.binding_before` takes the last binding on an
earlier line), which is exact for one statement a line. A line such as ``logits = m(x); loss =
crit(logits, y); loss.backward()`` binds ``loss`` on the backward's own line, before it: the
lookup skips that binding and finds an older one (a validation loss computed under
``no_grad`` above). A rule that would speak about the older value cannot tell which one the
statement reads, so it stays silent (GT201's loss made without a graph).
"""
from __future__ import annotations

import ast

from gradtrace.lint.flow import Scope


def bound_earlier_on_line(scope: Scope, expr: ast.AST, node: ast.AST) -> bool:
    """A name ``expr`` reads is bound by a statement of ``node``'s line that starts before
    ``node`` (NOTE [bound earlier on the same line])."""
    line, col = getattr(node, "lineno", 0), getattr(node, "col_offset", 0)
    for n in ast.walk(expr):
        if isinstance(n, ast.Name):
            for b in scope.bindings.get(n.id, ()):
                if b.line == line and b.stmt.col_offset < col:
                    return True
    return False
