"""Methods a file installs as an instance's ``forward``.

# NOTE [installed forwards]
``backbone.forward = functools.partial(backbone.get_intermediate_layers, n=4)`` (or
``backbone.forward = backbone.features``) makes every later call ``backbone(x)`` run that
method: ``nn.Module.__call__`` looks ``forward`` up on the instance first. For a module class of
the file, :func:`installed_methods` gives the names of its methods so installed on one of its
instances (the target's kind read by the kinds layer, NOTE [kinds]; the method taken from the
same object). A decorator on such a method decides what ``forward`` does.
"""
from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import function_scopes, scope_nodes

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

_INSTALL_RE = re.compile(r"\.forward\s*=[^=]")
PARTIALS = frozenset({"functools.partial"})


def installed_methods(ctx: Context, cls: str) -> frozenset[str]:
    """Names of methods of the module class ``cls`` installed as ``forward`` of an instance
    (NOTE [installed forwards])."""
    table: dict[str, frozenset[str]] = ctx.memo(
        "installed-forwards", ctx.tree, lambda: _index(ctx))
    return table.get(cls, frozenset())


def _index(ctx: Context) -> dict[str, frozenset[str]]:
    out: dict[str, set[str]] = {}
    if not _INSTALL_RE.search(ctx.code):
        return {}
    for fn in function_scopes(ctx.tree):
        for n in scope_nodes(fn):
            if not (isinstance(n, ast.Assign) and len(n.targets) == 1):
                continue
            t = n.targets[0]
            if not (isinstance(t, ast.Attribute) and t.attr == "forward"):
                continue
            method = _method_of(n.value, dotted(t.value), ctx)
            if method is None:
                continue
            k = ctx.analysis.kind_in(t.value, fn, n.lineno)
            if k is not None and k.what == MODULE and k.cls:
                out.setdefault(k.cls.rpartition(".")[2], set()).add(method)
    return {c: frozenset(ms) for c, ms in out.items()}


def _method_of(v: ast.expr, owner: str | None, ctx: Context) -> str | None:
    """``owner.m`` or ``partial(owner.m, ...)``: ``m``."""
    if isinstance(v, ast.Call) and ctx.qualified_name(v.func) in PARTIALS and v.args:
        v = v.args[0]
    if isinstance(v, ast.Attribute) and owner is not None and dotted(v.value) == owner:
        return v.attr
    return None
