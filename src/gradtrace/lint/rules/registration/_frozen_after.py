"""A whole freeze made after the optimizer was built, before it steps (GT431)."""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.steps import step_calls
from gradtrace.lint.flow import Scope


def frozen_before_step(scope: Scope, freeze: ast.stmt, opt: str) -> bool:
    """``freeze`` runs once, outside any loop or branch of ``scope``, and ``opt.step()`` runs
    later in ``scope``: an optimizer built over everything before the freeze steps only frozen
    parameters (``Adam(model.parameters())``, then ``model.requires_grad_(False)``, then the
    loop: the loss has nothing that requires grad)."""
    if scope.loops_of(freeze) or scope.branches.get(id(freeze)):
        return False
    end = freeze.end_lineno or freeze.lineno
    return any(st.optimizer == opt and st.stmt.lineno > end
               for st in step_calls(scope.ctx, scope.node).steps)
