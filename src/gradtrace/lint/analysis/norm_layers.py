"""Whether a module holds a normalisation layer that keeps running statistics.

# NOTE [running statistics]
``nn.BatchNorm1d/2d/3d``, ``SyncBatchNorm`` and their lazy forms keep ``running_mean`` and
``running_var`` (``track_running_stats=True`` by default) and, in train mode, write every batch's
statistics into them, whatever ``requires_grad`` their weight has; ``InstanceNorm*`` keeps them
only with ``track_running_stats=True``; ``LayerNorm``/``GroupNorm`` keep none
(pytorch-facts.md#frozen-norm-statistics). The answer is read from what the file shows: a torch
norm constructor, a container (``Sequential``/``ModuleList``/``ModuleDict``) built from such
calls, or a module class of the file (and its bases of the file) that builds one in any of its
methods. A class of another package is unknown: False (no guess from its name).
"""
from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

_BATCH_NORM = re.compile(r"^torch\.nn\.(Lazy)?(BatchNorm[123]d|SyncBatchNorm)$")
_INSTANCE_NORM = re.compile(r"^torch\.nn\.(Lazy)?InstanceNorm[123]d$")
_CONTAINERS = frozenset({"torch.nn.Sequential", "torch.nn.ModuleList", "torch.nn.ModuleDict"})


def _keyword(call: ast.Call, name: str) -> object:
    for k in call.keywords:
        if k.arg == name:
            return k.value.value if isinstance(k.value, ast.Constant) else ...
    return None


def is_running_norm_call(call: ast.Call, ctx: Context) -> bool:
    """``nn.BatchNorm2d(c)`` (not ``track_running_stats=False``), or ``nn.InstanceNorm2d(c,
    track_running_stats=True)``."""
    q = ctx.call_name(call) or ""
    if _BATCH_NORM.match(q):
        return _keyword(call, "track_running_stats") is not False
    return bool(_INSTANCE_NORM.match(q)) and _keyword(call, "track_running_stats") is True


def _call_holds(call: ast.Call, ctx: Context, seen: set[str]) -> bool:
    if is_running_norm_call(call, ctx):
        return True
    q = ctx.call_name(call) or ""
    if q in _CONTAINERS:
        return any(isinstance(n, ast.Call) and _call_holds(n, ctx, seen)
                   for a in (*call.args, *(k.value for k in call.keywords)) for n in walk(a))
    return isinstance(call.func, ast.Name) and class_holds(call.func.id, ctx, seen)


def class_holds(name: str, ctx: Context, seen: set[str] | None = None) -> bool:
    """Whether the module class ``name`` of the file builds a running-statistics norm layer in
    one of its methods (or a base of the file does), directly or through classes of the file."""
    memo: dict[str, bool] = ctx.memo("running-norm-classes", ctx.tree, dict)
    if name in memo:
        return memo[name]
    seen = set() if seen is None else seen
    cls = ctx.analysis.classes.get(name)
    if cls is None or not cls.is_module or name in seen:
        return False
    seen.add(name)
    got = any(isinstance(n, ast.Call) and _call_holds(n, ctx, seen) for n in walk(cls.node)) \
        or any(isinstance(b, ast.Name) and class_holds(b.id, ctx, seen) for b in cls.node.bases)
    memo[name] = got
    return got


def holds_running_norm(expr: ast.expr, scope: Scope, line: int, ctx: Context) -> bool:
    """Whether the module ``expr`` holds (or is) such a layer, as far as the file shows;
    ``net[:-1]`` asks about ``net``."""
    while isinstance(expr, ast.Subscript):
        expr = expr.value
    k = ctx.analysis.kind(expr, scope, line)
    if k is None or k.what != MODULE:
        return False
    if isinstance(k.node, ast.Call) and (ctx.call_name(k.node) or "").startswith("torch.nn."):
        return _call_holds(k.node, ctx, set())
    return k.cls is not None and class_holds(k.cls, ctx)


def is_running_norm(expr: ast.expr, scope: Scope, line: int, ctx: Context) -> bool:
    """Whether ``expr`` is itself such a layer (``model.bn`` where ``self.bn =
    nn.BatchNorm1d(h)``)."""
    k = ctx.analysis.kind(expr, scope, line)
    return k is not None and k.what == MODULE and isinstance(k.node, ast.Call) \
        and is_running_norm_call(k.node, ctx)
