"""GT302's cheap text tests, before any scope is built: whether a function's (or the file's)
code text may make a name a grad leaf (assigned with ``requires_grad``/``Parameter``, flagged,
a loop target, or bound to a same-file helper that returns a leaf), and whether it mentions
words at all."""
from __future__ import annotations

import ast
import re

from gradtrace.lint.context import Context
from gradtrace.lint.rules.leaf._tensors import leaf_helpers, node_mentions
from gradtrace.lint.rules.leaf._writes import own_statements


LEAF_NAME_RE = re.compile(r"(?m)^[ \t]*([\w.]+)[ \t]*=[^\n]*(?:requires_grad|Parameter)"
                          r"|([\w.]+)\.requires_grad"
                          r"|\bfor[ \t]+(?:\w+[ \t]*,[ \t]*)?(\w+)[ \t]+in[ \t]")


FLAGGED_RE = re.compile(r"([\w.]+)\.requires_grad")


GLOBAL_LEAF_RE = re.compile(r"(?m)^(\w+)[ \t]*=[^\n]*(?:requires_grad|Parameter)")


def _maybe_leaf_text(ctx: Context, fn: ast.AST, name: str, whole: bool = False) -> bool:
    """Cheap textual pre-check before building the scope: is ``name`` made a grad leaf here?

    One regex pass per function (or per file for module-level leaves), cached as a name set.
    """
    if whole or isinstance(fn, ast.Module):
        names = ctx.memo("gt3-global-leaf-names", ctx.tree, lambda: frozenset(
            n for ln in ctx.code_lines if ("requires_grad" in ln or "Parameter" in ln)
            for n in GLOBAL_LEAF_RE.findall(ln)) | _helper_made(ctx))
        if whole or name in names:
            return name in names

    def make() -> frozenset[str]:
        lines = ctx.code_lines if isinstance(fn, ast.Module) else \
            ctx.code_lines[fn.lineno - 1:fn.end_lineno]  # type: ignore[attr-defined]
        out: set[str] = set()
        for ln in lines:
            if "requires_grad" in ln or "Parameter" in ln or "for " in ln:
                for m in LEAF_NAME_RE.findall(ln):
                    out.update(n for n in m if n)
                out.update(FLAGGED_RE.findall(ln))  # `opt.w = a.requires_grad_()`: `a` too
        return frozenset(out) | _helper_made(ctx, fn)
    return name in ctx.memo("gt3-leaf-names", fn, make)


def _helper_made(ctx: Context, fn: ast.AST | None = None) -> frozenset[str]:
    """Names bound (in ``fn``, default the module body) to a call of a same-file helper
    returning a grad leaf (``weights = init_params(...)``)."""
    if "requires_grad" not in ctx.code:
        return frozenset()
    return ctx.memo("gt3-helper-made", fn or ctx.tree, lambda: _bound_from_helpers(
        ctx, (fn or ctx.tree).body))  # type: ignore[attr-defined]


def _bound_from_helpers(ctx: Context, body: list[ast.stmt]) -> frozenset[str]:
    helpers = leaf_helpers(ctx)
    return frozenset(t.id for s in own_statements(body) if isinstance(s, ast.Assign)
                     and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Name)
                     and s.value.func.id in helpers
                     for t in s.targets if isinstance(t, ast.Name)) if helpers else frozenset()


def _mentions(ctx: Context, fn: ast.AST, *words: str) -> bool:
    if isinstance(fn, ast.Module):
        return ctx.mentions(*words)
    return node_mentions(ctx, fn, *words)
