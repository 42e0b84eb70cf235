"""The cut every caller hands a parameter, in this file or another.

# NOTE [cuts handed by the callers]
``def update(optimizer, log_probs, rewards): loss = -(torch.stack(log_probs) * returns).sum();
loss.backward()`` says nothing by itself of where ``log_probs`` comes from; its calls do
(``update(optimizer, log_probs, rewards)``, with ``log_probs`` filled from
``policy.select_action(obs)``, whose every result is made under ``torch.no_grad()``). The loss
paths read a parameter as live (it may carry the caller's graph); when every call of the
function, in its file and in the project's other files (NOTE [reverse index]), passes a value
that the caller's own loss-path tracer finds not live, the parameter carries the cuts those
values carry (none: data, as NOTE [parameters given data] reads it within one file): the
same fact as the inline loop's, read one call up.
A caller of this file gives its own cut (the root line, reported as written inline); a caller
of another file gives a cut there (or the cut it reaches in a third file), reported at the
parameter with the other file's code (NOTE [project index]). No call seen, a call with a
spread (``*args``/``**kw``) or without the argument, or one caller whose value is live or
unknown: live, as before. One call up (a caller's own parameters stay as they are read there).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Callable

from gradtrace.lint.analysis.away_cuts import Away, cut_away
from gradtrace.lint.analysis.cuts import Cut, Trace
from gradtrace.lint.analysis.owners import shown_path
from gradtrace.lint.grad_modes import FUNCTION_TYPES

if TYPE_CHECKING:
    from gradtrace.lint.analysis.origins import Tracer
    from gradtrace.lint.context import Context

_BUSY: set[tuple[int, str]] = set()  # (function, parameter) being asked: one call up


def caller_cuts(ctx: Context, fn: ast.AST, name: str, tracer: Callable[[Context, ast.AST], Tracer]
                ) -> Trace | None:
    """The cuts every caller passes for the parameter ``name`` of ``fn``, each read by the
    caller's ``tracer`` (no cut: data); None: no caller seen, or one passes a value that may
    be live. See NOTE [cuts handed by the callers]."""
    if not isinstance(fn, FUNCTION_TYPES) or not _is_param(fn, name):
        return None
    memo: dict[tuple[int, str], Trace | None] = ctx.memo("caller-cuts", ctx.tree, dict)
    key = (id(fn), name)
    if key in memo:
        return memo[key]
    if _BUSY:
        return None  # asked from a caller's trace: one call up only
    _BUSY.add(key)
    try:
        memo[key] = _caller_cuts(ctx, fn, name, tracer)
    finally:
        _BUSY.discard(key)
    return memo[key]


def _is_param(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    a = fn.args
    return any(x.arg == name for x in (*a.posonlyargs, *a.args, *a.kwonlyargs))


def _caller_cuts(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str,
                 tracer: Callable[[Context, ast.AST], Tracer]) -> Trace | None:
    from gradtrace.lint.analysis.callees import function_sites
    from gradtrace.lint.analysis.foreign_params import other_sites
    from gradtrace.lint.analysis.grad_values import callers
    sites = function_sites(ctx.analysis, fn) or []
    given = list(callers(ctx, fn, name))
    if len(given) != len(sites):
        return None
    cuts: list[Cut] = []
    for call, where, arg in given:
        tr = tracer(ctx, where).trace(arg, ctx.scope(where).statement_of(call), call.lineno)
        if tr.live:
            return None
        cuts.extend(Cut(c.kind, c.node, c.operand, ((name, call.lineno),) + c.via)
                    for c in tr.cuts)
    away = [] if fn not in ctx.tree.body else other_sites(ctx, fn)
    for s in away:
        if any(k.arg is None for k in s.call.keywords) \
                or any(isinstance(x, ast.Starred) for x in s.call.args):
            return None
        arg = s.ctx.analysis.arguments(fn, s.call).get(name)  # type: ignore[arg-type]
        if arg is None:
            return None
        tr = tracer(s.ctx, s.where).trace(arg, s.ctx.scope(s.where).statement_of(s.call),
                                           s.call.lineno)
        if tr.live:
            return None
        if tr.cuts:
            cuts.append(_carried(ctx, fn, name, s.ctx, min(
                tr.cuts, key=lambda c: (c.node.lineno, c.node.col_offset))))
    if not given and not away:
        return None
    return Trace(False, tuple(cuts))


def _carried(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str,
             octx: Context, c: Cut) -> Cut:
    """A cut of another file's caller, reported at the parameter with that file's code."""
    a = fn.args
    node = next(x for x in (*a.posonlyargs, *a.args, *a.kwonlyargs) if x.arg == name)
    away = cut_away(octx, c.node)
    if away is not None:  # a third file's cut, reached there through a call
        away = away._replace(path=shown_path(away.path, ctx.path))
    else:
        code = octx.source(c.node)
        if octx.line_text(c.node.lineno).lstrip().startswith("@" + code):
            code = "@" + code
        helper = next((n[:-2] for n, _ in reversed(c.via) if n.endswith("()")), name)
        away = Away(shown_path(octx.path, ctx.path), c.node.lineno, code,
                    octx.source(c.operand), helper)
    ctx.memo("project-away-cuts", ctx.tree, dict)[id(node)] = (node, away)
    return Cut(c.kind, node, node, ((name, node.lineno), (f"{away.helper}()", node.lineno)))


def callers_mentioning(ctx: Context, fn: ast.AST, words: tuple[str, ...]) -> bool:
    """Whether a caller of ``fn`` (this file's, whose code calls a function of another file
    holding one of ``words``; or another file's, holding one or calling such a function) may
    hand a parameter a cut of those words' kind (NOTE [cuts handed by the callers]): the
    file-level gate of a rule that needs such a word."""
    from gradtrace.lint.analysis.callees import function_sites
    from gradtrace.lint.analysis.foreign_params import other_sites
    from gradtrace.lint.analysis.project_files import imported_mentioning
    if not isinstance(fn, FUNCTION_TYPES) or not (fn.args.args or fn.args.posonlyargs
                                                  or fn.args.kwonlyargs):
        return False
    for _, where in function_sites(ctx.analysis, fn) or ():
        if where is not fn and imported_mentioning(ctx, _code(ctx, where), words):
            return True
    for s in other_sites(ctx, fn) if fn in ctx.tree.body else ():
        if any(w in s.ctx.code for w in words) \
                or imported_mentioning(s.ctx, _code(s.ctx, s.where), words):
            return True
    return False


def _code(ctx: Context, node: ast.AST) -> str:
    if isinstance(node, ast.Module):
        return ctx.code
    return ctx.memo("gt1-code-of", node, lambda: "\n".join(
        ctx.code_lines[node.lineno - 1:node.end_lineno]))  # type: ignore[attr-defined]
