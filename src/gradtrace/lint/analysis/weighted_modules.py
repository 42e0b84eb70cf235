"""Whether a module surely holds parameters that require grad when it is called.

# NOTE [weighted modules]
A module's output is a non-leaf (it has a ``grad_fn``) whenever grad is on and one of its
parameters requires grad: ``nn.Linear``, a convolution, an embedding, a recurrent layer, a
normalisation layer with its default affine weights, a ``Sequential`` made of such, or a class
of the file whose ``__init__`` builds one (or an ``nn.Parameter``). A layer without parameters
(``nn.ReLU``, pooling, dropout, ``nn.Identity``) hands back a leaf when its input is one, and a
module some statement of the file freezes may too: :func:`surely_weighted` answers False for
those, and for any file that freezes anything (``requires_grad = False``,
``requires_grad_(False)``, ``requires_grad=False``), where a frozen feature extractor's output
may be a leaf on purpose (saliency code sets ``feats.requires_grad = True`` on it).
"""
from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.nodes import of_types

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

WEIGHTED = frozenset(f"torch.nn.{n}" for n in (
    "Linear", "Bilinear", "LazyLinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d",
    "ConvTranspose2d", "ConvTranspose3d", "Embedding", "EmbeddingBag", "RNN", "LSTM", "GRU",
    "RNNCell", "LSTMCell", "GRUCell", "MultiheadAttention", "Transformer",
    "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
    "TransformerDecoderLayer", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm",
    "GroupNorm", "PReLU"))
PARAMETER = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
SEQUENTIAL = "torch.nn.Sequential"
FREEZE_RE = re.compile(r"requires_grad(?:_\(\s*False|\s*=\s*False)")


def surely_weighted(expr: ast.AST, scope: Scope, line: int) -> bool:
    """``expr`` is a module that holds a parameter requiring grad, in a file that freezes
    nothing (NOTE [weighted modules])."""
    ctx = scope.ctx
    if ctx.memo("weighted-freezes", ctx.tree, lambda: bool(FREEZE_RE.search(ctx.code))):
        return False
    k = ctx.analysis.kind(expr, scope, line)
    if k is None or k.what != MODULE or not k.cls:
        return False
    if k.cls in WEIGHTED:
        return True
    if k.cls == SEQUENTIAL:
        return isinstance(k.node, ast.Call) and _builds_weights(k.node, ctx)
    info = ctx.analysis.classes.get(k.cls)
    init = None if info is None or not info.is_module else info.methods.get("__init__")
    return init is not None and _builds_weights(init, ctx)


def _builds_weights(node: ast.AST, ctx: Context) -> bool:
    return any((ctx.qualified_name(c.func) or "") in WEIGHTED | PARAMETER  # type: ignore[attr-defined]
               for c in of_types(node, (ast.Call,)))
