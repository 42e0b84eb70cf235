"""Names a file calls but never binds: no import, def, class, assignment, parameter, loop or
``with`` target, ``global`` or builtin of that name, and no ``from m import *`` that could
bring it. Calling one raises ``NameError``: the call gives no value at all (EnlightenGAN's
``util.load_vgg16`` still calls ``load_lua`` after its import was deleted with
``torch.utils.serialization``), so nothing is known of what the binding would have held."""
from __future__ import annotations

import ast
import builtins
from typing import TYPE_CHECKING

from gradtrace.lint.nodes import of_types

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

_BUILTINS = frozenset(dir(builtins)) | {"__file__", "__name__", "__doc__", "__builtins__",
                                        "__spec__", "__loader__", "__package__", "__path__"}
# the node types that bind, read or may make a name (every other node is passed by): the
# answer does not depend on the order they are met in, so the file's walk index gives them
# (NOTE [walk index] in gradtrace.lint.nodes), without a generator per node of ``ast.walk``
_TYPES = (ast.Name, ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef,
          ast.ClassDef, ast.arg, ast.Global, ast.Nonlocal, ast.ExceptHandler, ast.MatchAs,
          ast.MatchStar, ast.Call)


def is_undefined(ctx: Context, name: str) -> bool:
    """Whether ``name`` is in :func:`undefined_names`, the whole-file walk skipped when the
    answer is known without it: a builtin, a name an import of the file binds (the import
    table holds only this tree's imports) or a top-level function of the file is bound."""
    if name in _BUILTINS or name in ctx.imports.aliases or name in ctx.imports.package \
            or name in ctx.analysis.functions:
        return False
    return name in undefined_names(ctx)


def undefined_names(ctx: Context) -> frozenset[str]:
    """Names read in the file that nothing in it binds (empty when a star import or a
    dynamic binding could bind any name)."""
    def make() -> frozenset[str]:
        bound: set[str] = set()
        read: set[str] = set()
        for n in of_types(ctx.tree, _TYPES):
            if isinstance(n, ast.Name):
                (read if isinstance(n.ctx, ast.Load) else bound).add(n.id)
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                for a in n.names:
                    if a.name == "*":
                        return frozenset()
                    bound.add(a.asname or a.name.partition(".")[0])
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(n.name)
            elif isinstance(n, ast.arg):
                bound.add(n.arg)
            elif isinstance(n, (ast.Global, ast.Nonlocal)):
                bound.update(n.names)
            elif isinstance(n, ast.ExceptHandler) and n.name:
                bound.add(n.name)
            elif isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
                bound.add(n.name)
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) \
                    and n.func.id in ("exec", "globals", "locals", "vars", "setattr"):
                return frozenset()  # names may be made at run time
        return frozenset(read - bound - _BUILTINS)
    return ctx.memo("undefined-names", ctx.tree, make)
