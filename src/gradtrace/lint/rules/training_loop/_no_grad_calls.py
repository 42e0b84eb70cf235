"""Results that carry no graph: of a function of this file run with grad off (the indices of
a (values, indices) pair: ``analysis.cuts.unpacks_indices``).

# NOTE [no-grad helpers]
``p_model = self.update_stats(logits, p_model)`` where ``update_stats`` is decorated with
``@torch.no_grad()`` (or ``@torch.inference_mode()``): every operation in its body makes a
tensor without history (PyTorch records nothing while grad is off), so what it returns has no
``grad_fn`` however its arguments were computed. Only what it hands back untouched keeps
its history: ``return x`` of an argument ``x`` returns the caller's tensor. So a returned
element counts as fresh when it is an operation or call (``stats.mean()``, ``a * 0.9 + b``),
or a local name every binding of which is one and which, if it is a parameter, the body
rebinds on every path (at its top level, or in both arms of an ``if``). A body that turns grad
back on (``with torch.enable_grad():``) is not trusted.
"""
from __future__ import annotations

import ast

from gradtrace.lint.context import Context
from gradtrace.lint.grad_modes import grad_mode_of
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import bfs_walk

FUNCTION_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef)


def no_grad_result(ctx: Context, fn: ast.AST | None, names: list[str | None] | None,
                   index: int | None) -> bool:
    """Whether the value ``fn`` returns (element ``index`` of a tuple unpacked into ``names``,
    or the whole value when ``index`` is None) is computed with grad off and carries no graph
    (NOTE [no-grad helpers])."""
    if not isinstance(fn, FUNCTION_TYPES) or not any(
            grad_mode_of(d, ctx.imports) in ("off", "inference") for d in fn.decorator_list):
        return False
    if any(isinstance(n, (ast.With, ast.AsyncWith)) and any(
            grad_mode_of(i.context_expr, ctx.imports) in ("on", "reset") for i in n.items)
            for n in bfs_walk(fn)):
        return False
    rets = [r.value for r in _returns(fn)]
    if not rets or any(r is None for r in rets):
        return False
    params = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
    for r in rets:
        if index is None:
            e = r
        elif isinstance(r, ast.Tuple) and names is not None and len(r.elts) == len(names):
            e = r.elts[index]
        else:
            return False
        if not _fresh(fn, e, params):  # type: ignore[arg-type]
            return False
    return True


def _returns(fn: ast.AST) -> list[ast.Return]:
    """The ``return`` statements of ``fn`` itself (not of functions nested in it)."""
    out: list[ast.Return] = []
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        n = stack.pop()
        if isinstance(n, (*FUNCTION_TYPES, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(n, ast.Return):
            out.append(n)
        stack.extend(ast.iter_child_nodes(n))
    return out


def _made(e: ast.expr | None) -> bool:
    """An operation or a call: a new tensor (not a name or attribute handed on as it is)."""
    if isinstance(e, ast.IfExp):
        return _made(e.body) and _made(e.orelse)
    return isinstance(e, (ast.BinOp, ast.UnaryOp, ast.Call, ast.Constant, ast.Compare))


def _fresh(fn: ast.FunctionDef | ast.AsyncFunctionDef, e: ast.expr, params: set[str]) -> bool:
    if _made(e):
        return True
    if not isinstance(e, ast.Name):
        return False
    values = []
    for n in bfs_walk(fn):
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            if any(dotted(t) == e.id for t in targets):
                values.append(n if isinstance(n, ast.AugAssign) else n.value)
            elif any(_binds(t, e.id) for t in targets):
                return False  # unpacked from something: not known
        elif isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)) and _binds(n.target, e.id) \
                or isinstance(n, ast.withitem) and _binds(n.optional_vars, e.id) \
                or isinstance(n, ast.NamedExpr) and _binds(n.target, e.id):
            return False  # bound by a loop, a `with ... as` or `:=`: not known
    if not values or not all(isinstance(v, ast.AugAssign) or _made(v) for v in values):
        return False
    return e.id not in params or _rebound(fn.body, e.id)


def _binds(target: ast.AST | None, name: str) -> bool:
    return target is not None and any(isinstance(x, ast.Name) and x.id == name
                                      for x in bfs_walk(target))


def _rebound(body: list[ast.stmt], name: str) -> bool:
    """Every path through ``body`` assigns ``name`` (a plain assignment at its top level, or
    one in both arms of an ``if``)."""
    for s in body:
        if isinstance(s, (ast.Assign, ast.AnnAssign)):
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            if any(dotted(t) == name for t in targets):
                return True
        elif isinstance(s, ast.If) and s.orelse and _rebound(s.body, name) \
                and _rebound(s.orelse, name):
            return True
        elif isinstance(s, (ast.Return, ast.Raise)):
            return False
    return False
