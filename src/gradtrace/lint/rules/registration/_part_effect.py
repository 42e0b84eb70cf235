"""GT443's words for what a frozen part put back in training mode does again."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.mode_layers import part_layers
from gradtrace.lint.names import dotted

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope


def _eval_call(n: ast.AST) -> bool:
    """``x.eval()`` on something other than ``self``."""
    return isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
        and n.func.attr == "eval" and not n.args and dotted(n.func.value) != "self"


def part_effect(ev: ast.AST, holder: object, scope: Scope, ctx: Context) -> str:
    """What acts in training mode again in the part (NOTE [mode layers built]); BatchNorm's
    statistics when the part's layers are not all shown."""
    got = part_layers(ev, holder, scope, ctx) if _eval_call(ev) else None
    if not got or "norm" in got and "dropout" not in got:
        return "its BatchNorm statistics keep updating"
    said = {"norm": "its BatchNorm statistics keep updating", "dropout": "its Dropout "
            "drops activations again", "training": "its `self.training` branches run again"}
    return " and ".join(said[k] for k in ("norm", "dropout", "training") if k in got)
