"""What GT521 reads in a value ``__init__`` computes: the torch functions that combine a list
of tensors into a new one, and whether the value's backward saves no tensor
(NOTE [graph built at construction])."""
from __future__ import annotations

import ast

from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted

# torch functions that compute a new tensor (with a graph) from a list or tuple of tensors
COMBINE = frozenset({"torch.stack", "torch.cat", "torch.concat", "torch.concatenate",
                     "torch.hstack", "torch.vstack", "torch.dstack", "torch.column_stack",
                     "torch.row_stack", "torch.block_diag"})
# operations that only view their input (GT521's VIEW_METHODS, repeated here: no cycle)
VIEWS = frozenset({"t", "view", "view_as", "reshape", "transpose", "permute", "expand",
                   "expand_as", "unsqueeze", "squeeze", "narrow", "select", "flatten",
                   "unflatten", "contiguous"})


THEN = (", and once the first `backward()` freed the graph the next raises `Trying to backward "
        "through the graph a second time`")


def saves_nothing(v: ast.AST, ctx: Context) -> bool:
    """``torch.stack([self.x, self.y], 1)``: a list of attributes (and their views) combined
    by a function whose backward saves no tensor, so a second backward does not raise."""
    def plain(e: ast.AST) -> bool:
        while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
                and e.func.attr in VIEWS:
            e = e.func.value
        return isinstance(e, ast.Attribute) and dotted(e.value) == "self"
    return isinstance(v, ast.Call) and (ctx.call_name(v) or "") in COMBINE and all(
        isinstance(a, (ast.List, ast.Tuple)) and all(plain(x) for x in a.elts)
        or isinstance(a, ast.Constant) for a in v.args)
