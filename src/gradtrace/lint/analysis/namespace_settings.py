"""Settings a script fixes in one namespace object: ``args = argparse.Namespace(freeze=False,
lr=1e-4)`` (or ``types.SimpleNamespace(...)``) at the top level of the file.

# NOTE [fixed namespace settings]
A script that builds its settings as one namespace of constants, bound once at the top level
and never written afterwards (no ``args.x = ...``, no ``setattr(args, ...)``, no ``vars(args)``
that could update it), reads the same value at every ``args.x``: an ``if args.use_adapter and
"Adapter" in name:`` test inside a loop over parameters is decided by it (False: only the
``else`` arm runs). :func:`namespace_settings` gives ``"args.x" -> value`` in the
``flag_truth`` spelling, for a scope where ``args`` is that global (not a parameter or a
local of a function). Anything else (``parser.parse_args()``, a config file) stays unknown.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

NAMESPACES = frozenset({"argparse.Namespace", "types.SimpleNamespace"})


def _file_settings(ctx: Context) -> dict[str, object]:
    found: dict[str, ast.Call] = {}
    bound: dict[str, int] = {}
    for s in ctx.tree.body:
        for t in s.targets if isinstance(s, ast.Assign) else ():
            for n in walk(t):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                    bound[n.id] = bound.get(n.id, 0) + 1
        if isinstance(s, ast.Assign) and len(s.targets) == 1 \
                and isinstance(s.targets[0], ast.Name) and isinstance(s.value, ast.Call) \
                and (ctx.qualified_name(s.value.func) or "") in NAMESPACES \
                and not s.value.args:
            found[s.targets[0].id] = s.value
    if not found:
        return {}
    for n in walk(ctx.tree):  # written anywhere: not fixed
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, (ast.Store, ast.Del)) \
                and isinstance(n.value, ast.Name):
            found.pop(n.value.id, None)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) \
                and n.func.id in ("setattr", "vars", "delattr") and n.args \
                and isinstance(n.args[0], ast.Name):
            found.pop(n.args[0].id, None)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            for name in n.names:
                found.pop(name, None)
    out: dict[str, object] = {}
    for name, call in found.items():
        if bound.get(name, 0) != 1:
            continue
        for k in call.keywords:
            if k.arg is not None and isinstance(k.value, ast.Constant):
                out[f"{name}.{k.arg}"] = k.value.value
    return out


def namespace_settings(ctx: Context, scope: Scope) -> dict[str, object]:
    """``"args.x" -> constant`` for the fixed namespaces of the file
    (NOTE [fixed namespace settings]) that ``scope`` reads as the global (a function binding
    the name has its own)."""
    got: dict[str, object] = ctx.memo("namespace-settings", ctx.tree, lambda: _file_settings(ctx))
    if not got or scope.node is ctx.tree:
        return got
    a = getattr(scope.node, "args", None)
    params = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg)
              if x is not None} if isinstance(a, ast.arguments) else set()
    return {k: v for k, v in got.items() if (root := k.partition(".")[0]) not in params
            and not scope.bindings.get(root)}
