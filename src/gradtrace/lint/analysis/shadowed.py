"""A name a function binds itself hides the module imported under that name.

# NOTE [parameter shadows an import]
``def calculate_loss(memories, nn): log_val = nn(obs)`` after ``import torch.nn as nn``: inside
the function ``nn`` is its own parameter (or a name it assigns), the model the caller passed,
not ``torch.nn``. The file's import table knows no scopes, so ``qualified_name`` spells the call
``torch.nn``, and the origins tracer read it as a torch function whose result comes from its
arguments only (a GT103 alarm blamed the NumPy-made input for cutting the loss from the model).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gradtrace.lint.analysis.origins import Tracer


def shadows_import(tracer: Tracer, e: ast.expr) -> bool:
    """Whether the root name of ``e`` (``nn`` of ``nn(x)``) is imported by the file and bound
    by the traced function itself: an argument or a name it assigns.

    NOTE [parameter shadows an import] says why."""
    while isinstance(e, ast.Attribute):
        e = e.value
    return isinstance(e, ast.Name) and e.id in tracer.ctx.imports.aliases and (
        e.id in tracer.params or e.id in tracer.settings or bool(tracer.scope.bindings.get(e.id)))
