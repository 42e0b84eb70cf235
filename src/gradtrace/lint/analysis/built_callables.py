"""Names bound to what a call without inputs builds and that the code then calls: a module.

# NOTE [built and called]
A forward pass takes an input. ``self.dis = self.net_dis().to(device)`` calls a factory the
object was handed (a network class stored on the strategy) with no argument at all, and the
function then calls ``self.dis(z)``: a tensor cannot be called, so the name holds a module
(or another callable), not an activation. Its binding holds no graph of its own, whatever
the spelling of the factory says, and two losses that both call it (or hand it to a helper:
``penalty(self.dis, a, b)``) share no graph through it. Device and dtype moves
(``.to(...)``, ``.cuda()``) keep the object; any argument of the call keeps the old reading.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.objects import strip_same
from gradtrace.lint.names import dotted

if TYPE_CHECKING:
    from gradtrace.lint.flow import Binding, Scope


def built_and_called(scope: Scope, b: Binding) -> bool:
    """``b`` binds a call with no argument (behind device moves) and the scope calls the name
    it binds (NOTE [built and called])."""
    v = strip_same(b.value) if b.value is not None else None
    if not isinstance(v, ast.Call) or v.args or v.keywords:
        return False
    called = scope.ctx.memo("called-names", scope.node, lambda: {
        dotted(n.func) for n in ast.walk(scope.node) if isinstance(n, ast.Call)})
    return b.name in called
