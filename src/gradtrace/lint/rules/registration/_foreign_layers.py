"""Whether a call builds a layer of a class of another file of the project (GT401's elements).

# NOTE [layer class of another file]
``self.cnns = [ConvBNReLU(c, k) for c, k in zip(...)]`` with ``ConvBNReLU`` imported from
another file of the project: the project index (NOTE [project index] in
:mod:`gradtrace.lint.analysis.project`) finds the class, and it counts as a layer with
parameters when it is an ``nn.Module`` subclass of its own file that may create parameters
there: not one of that file's :func:`~._stateless.param_free_classes` (no layer with weights,
no parameter, no unknown object stored on ``self``; buffers, numbers and arguments it never
calls are no parameters). A class found there that is no module (a config record) or creates
no parameter (a dropout wrapper storing its rate and name, a filter bank of buffers) is no
layer, whatever its name: stricter than for a class of this file, whose buffers count. A class the
index cannot find (a module missing from the repository, an installed package) is judged as
before: by its name (:data:`LAYER_CLASS_RE`), the last resort.
"""
from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.modules import plain_class
from gradtrace.lint.names import dotted
from gradtrace.lint.rules.registration._stateless import module_classes, param_free_classes

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

LAYER_CLASS_RE = re.compile(r"^([A-Z]\w*)?(Layer|Block|Encoder|Decoder|Embedding|Attention|"
                            r"Linear|Conv\d?d?|MLP|Transformer|Expert|LSTM|GRU)$")


def foreign_layer(e: ast.AST, ctx: Context) -> bool | None:
    """True: ``e`` builds a module of a class of another file of the project that owns
    parameters there; False: the class is found there and is no such module; None: no call
    of a class the index finds (NOTE [layer class of another file])."""
    if not isinstance(e, ast.Call) or not isinstance(e.func, (ast.Name, ast.Attribute)):
        return None
    name = e.func.id if isinstance(e.func, ast.Name) else e.func.attr
    if not name[:1].isupper() or (isinstance(e.func, ast.Name) and name in ctx.analysis.classes):
        return None  # a function, or a class of this file (owns_params decides)
    q = ctx.call_name(e) or dotted(e.func) or ""
    if q.startswith("torch."):
        return None
    from gradtrace.lint.analysis.project import foreign_def
    got = foreign_def(ctx, e.func)
    if got is None or not isinstance(got[1], ast.ClassDef):
        return None
    octx, node = got
    return node.name in module_classes(octx) and node.name not in param_free_classes(octx)


def other_file_layer(e: ast.AST, ctx: Context) -> bool:
    """``e`` builds a layer of a class of another file: found by the index and owning
    parameters, or, when the index does not find it, named like a layer (``CrossLayer``,
    ``ResBlock``; not a ``torch.`` class, a module class or a plain class of this file)."""
    known = foreign_layer(e, ctx)
    if known is not None:
        return known
    if not isinstance(e, ast.Call) or not isinstance(e.func, (ast.Name, ast.Attribute)):
        return False
    q = ctx.call_name(e) or dotted(e.func) or ""
    last = q.rpartition(".")[2]
    return not q.startswith("torch.") and last not in module_classes(ctx) and \
        bool(LAYER_CLASS_RE.match(last)) and not plain_class(last, ctx)
