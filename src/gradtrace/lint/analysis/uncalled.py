"""Methods of the file's own module classes that nothing can run.

# NOTE [uncalled methods]
``def enable_input_require_grads(self): ... output.requires_grad_(True)`` defined on a model
class of a script that never calls it (nor names it anywhere: an attribute, a name, a string
``getattr`` could read, docstrings aside) changes nothing when the script runs. Known only for
a class whose bases are ``torch.nn.Module`` or such classes of the file (a framework base, Lightning's, calls
hooks the file never names), for a method name that ``nn.Module`` itself neither defines nor
calls (``forward``, ``train``, ``_apply``... run without the file naming them), in a file
that is a script (a module-level statement calls something): a library's method is called by
its users. A fact about the file being run, used to set aside what such a method would undo.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.module_api import MODULE_METHODS, ROOT_BASES

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def uncalled_nodes(ctx: Context) -> frozenset[int]:
    """``id`` of every node inside an uncalled method (NOTE [uncalled methods])."""
    return ctx.memo("uncalled-nodes", ctx.tree, lambda: _uncalled(ctx))


def _uncalled(ctx: Context) -> frozenset[int]:
    top = getattr(ctx.tree, "body", [])
    if not any(isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) or isinstance(
            s, ast.Assign) and isinstance(s.value, ast.Call) for s in top):
        return frozenset()
    cands: list[ast.AST] = []
    for info in ctx.analysis.classes.values():
        if not info.is_module or not _own_bases(ctx, info.node, set()):
            continue
        cands.extend(m for n, m in info.methods.items()
                     if not n.startswith("_") and n not in MODULE_METHODS)
    if not cands:
        return frozenset()
    named: dict[str, int] = {}
    for n in ast.walk(ctx.tree):
        key = n.attr if isinstance(n, ast.Attribute) else n.id if isinstance(n, ast.Name) \
            else None
        if key is not None:
            named[key] = named.get(key, 0) + 1
    docs = {id(s.value) for s in ast.walk(ctx.tree) if isinstance(s, ast.Expr)}
    texts = [n.value for n in ast.walk(ctx.tree) if isinstance(n, ast.Constant)
             and isinstance(n.value, str) and id(n) not in docs]
    out: set[int] = set()
    for m in cands:
        name = m.name  # type: ignore[attr-defined]
        if named.get(name) or any(name in t for t in texts):
            continue
        out.update(id(x) for x in ast.walk(m))
    return frozenset(out)


def _own_bases(ctx: Context, node: ast.ClassDef, seen: set[str]) -> bool:
    """Every base of ``node`` is ``nn.Module`` or a class of the file built on it only."""
    if not node.bases or node.keywords:
        return False
    for b in node.bases:
        if (ctx.qualified_name(b) or "") in ROOT_BASES:
            continue
        own = ctx.analysis.classes.get(b.id) if isinstance(b, ast.Name) else None
        if own is None or own.name in seen:
            return False
        seen.add(own.name)
        if not _own_bases(ctx, own.node, seen):
            return False
    return True
