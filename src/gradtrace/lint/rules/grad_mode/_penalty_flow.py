"""GT206's data flow: whether an ``autograd.grad`` result reaches a backward or a returned
penalty only through arithmetic, reductions and norms (names followed forward, through
containers and loops), and the gradients that already have a graph. Read by
:mod:`.autograd_calls` (``_kw`` too, which GT205 shares)."""
from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.callees import function_sites
from gradtrace.lint.analysis.cuts import is_functional_loss, is_torch_loss
from gradtrace.lint.analysis.facts import unpacked_value
from gradtrace.lint.analysis.graphless import graphless_data
from gradtrace.lint.analysis.steps import backward_loss, plain_grads
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import child_nodes, walk

if TYPE_CHECKING:
    from gradtrace.lint.flow import Scope

PENALTY_NAME_RE = re.compile(r"penalty|(^|_)gp($|_)|(^|_)r1($|_)|lipschitz", re.IGNORECASE)
PENALTY_METHODS = frozenset({
    "norm", "pow", "sum", "mean", "square", "abs", "sqrt", "view", "reshape", "flatten", "sub",
    "add", "mul", "clamp", "relu", "max", "amax", "contiguous", "float", "to", "squeeze",
    "unsqueeze"})
PENALTY_FUNCS = frozenset({
    "torch.norm", "torch.linalg.norm", "torch.linalg.vector_norm", "torch.sum", "torch.mean",
    "torch.square", "torch.abs", "torch.sqrt", "torch.stack", "torch.cat", "torch.clamp",
    "torch.nn.functional.relu", "torch.nn.functional.softplus", "torch.pow", "sum"})


def _kw(call: ast.Call, name: str) -> ast.keyword | None:
    return next((k for k in call.keywords if k.arg == name), None)


def _targets(stmt: ast.stmt) -> set[str]:
    ts = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]  # type: ignore[attr-defined]
    out: set[str] = set()
    for t in ts:
        for n in walk(t):
            name = dotted(n) if isinstance(n, (ast.Name, ast.Attribute)) else None
            if name:
                out.add(name)
    return out


def _torch_loss_call(call: ast.Call, inner: ast.AST, ctx: Context, origin: int,
                     scope: Scope | None = None) -> bool:
    """A torch loss (``F.mse_loss(...)``, ``nn.MSELoss()(...)``, or a name bound only to
    ``torch.nn.<X>Loss(...)``) whose other arguments are gradients without a graph too:
    force matching ``mse(true_forces, forces)`` with both from ``autograd.grad`` without
    ``create_graph`` is a constant term. Next to a value that may have a graph (a model's
    output, a gradient made with ``create_graph=True``) the gradient is a target: not followed.
    Beside data with no graph (NOTE [graphless data]) the gradient is the prediction too
    (derivative matching: ``mse(grad(out.sum(), x)[0], dy)``).
    The other gradients must be bound before ``origin`` (the line of the gradient followed):
    the one made last, from the model being trained, is the prediction, not the target."""
    if not _loss_callee(call.func, ctx):
        return False
    scope = scope or ctx.scope()
    return all(a is inner or _plain_value(a, scope, ctx, 0) and all(
        b.line < origin for n in walk(a) if isinstance(n, ast.Name)
        for b in scope.bindings.get(n.id, ())) or graphless_data(a, scope, call.lineno)
        for a in call.args)


def _loss_callee(f: ast.expr, ctx: Context) -> bool:
    if isinstance(f, ast.Call):
        return is_torch_loss(ctx.qualified_name(f.func))
    if is_functional_loss(ctx.qualified_name(f) or ""):
        return True
    if not isinstance(f, ast.Name):
        return False
    for scope in (ctx.scope(), ctx.scope(ctx.tree)):
        values = [unpacked_value(b, f.id) for b in scope.bindings.get(f.id, ())]
        if values:
            return all(isinstance(v, ast.Call) and is_torch_loss(ctx.qualified_name(v.func))
                       for v in values)
    return False


def _plain_value(e: ast.AST | None, scope: object, ctx: Context, depth: int) -> bool:
    """``e`` is a number, or made only from ``autograd.grad`` results without a graph
    (through names bound in ``scope``, arithmetic and subscripts)."""
    if depth > 6 or e is None:
        return False
    if isinstance(e, ast.Constant):
        return True
    if isinstance(e, ast.Call):
        return plain_grads(e)
    if isinstance(e, ast.UnaryOp):
        return _plain_value(e.operand, scope, ctx, depth + 1)
    if isinstance(e, ast.Subscript):
        return _plain_value(e.value, scope, ctx, depth + 1)
    if isinstance(e, ast.BinOp):
        return _plain_value(e.left, scope, ctx, depth + 1) and \
            _plain_value(e.right, scope, ctx, depth + 1)
    if isinstance(e, ast.Name):
        bs = scope.bindings.get(e.id, ())  # type: ignore[attr-defined]
        return bool(bs) and all(_plain_value(unpacked_value(b, e.id), scope, ctx, depth + 1)
                                for b in bs)
    return False


def _penalty_path(inner: ast.AST, root: ast.AST, ctx: Context, origin: int = 0,
                  scope: Scope | None = None) -> bool:
    """Whether ``inner`` reaches ``root`` only through arithmetic, reductions and norms (or a
    torch loss beside plain gradients bound before line ``origin``: :func:`_torch_loss_call`;
    ``scope``: the function holding ``root``, by default the one being checked)."""
    parents: dict[int, ast.AST] = {}
    for p in walk(root):
        for c in child_nodes(p):
            parents[id(c)] = p
    n = inner
    while n is not root:
        p = parents.get(id(n))
        if p is None:
            return False
        if isinstance(p, ast.Call):
            if n is p.func:
                n = p
                continue
            q = ctx.qualified_name(p.func) or ""
            if q not in PENALTY_FUNCS and not _torch_loss_call(p, n, ctx, origin, scope):
                return False
        elif isinstance(p, ast.Attribute):
            grand = parents.get(id(p))
            if not (isinstance(grand, ast.Call) and grand.func is p and p.attr in PENALTY_METHODS):
                return False
        elif not isinstance(p, (ast.BinOp, ast.UnaryOp, ast.Subscript, ast.Tuple, ast.List,
                                ast.keyword, ast.Starred)):
            return False
        n = p
    return True


def _tainted_sink(scope: object, stmt: ast.stmt, tainted: set[str], ctx: Context) -> ast.Call | None:
    """Follow ``tainted`` names forward through penalty-shaped assignments to a backward."""
    graphed = _graphed_grads(scope, ctx)
    for s in scope.stmts:  # type: ignore[attr-defined]
        if s.lineno <= stmt.lineno:
            continue
        for n in walk(s) if not hasattr(s, "body") else ():
            if isinstance(n, ast.Call) and backward_loss(n, ctx) is not None:
                loss = backward_loss(n, ctx)
                if any(_uses(loss, t) and _penalty_path(_use(loss, t), loss, ctx, stmt.lineno,
                                                        scope)  # type: ignore[arg-type]
                       or dotted(loss) == t
                       for t in tainted) and not any(_uses(loss, g) for g in graphed):
                    return n
        if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and s.value is not None \
                and not any(_uses(s.value, g) for g in graphed):
            for t in list(tainted):
                use = _use(s.value, t)
                if use is not None and _penalty_path(use, s.value, ctx, stmt.lineno,
                                                     scope):  # type: ignore[arg-type]
                    tainted |= _targets(s)
                    break
            else:
                _rebound(s, tainted)
        _carry(s, tainted)
    return None


# NOTE [penalty name rebound]
# A name the gradient reached stops carrying it when a later plain assignment binds it to a
# value not made from a tainted name through arithmetic, reductions and norms: VQGAN's
# adaptive weight `d_weight = norm(nll_grads) / norm(g_grads)` then
# `d_weight = torch.clamp(d_weight, 0, 1e4).detach()` is a cut constant, a coefficient the
# author made on purpose, not a penalty. An augmented assignment keeps what the name held.
def _rebound(s: ast.stmt, tainted: set[str]) -> None:
    if isinstance(s, (ast.Assign, ast.AnnAssign)):
        tainted -= _targets(s)


def _graphed_grads(scope: object, ctx: Context) -> set[str]:
    """Names bound to ``autograd.grad(..., create_graph=True)``: a term reading one has a graph,
    and a gradient without one beside it is the constant vector of a Hessian-vector product
    (GraSP's ``(grad_w * grad_f).sum()``), not a penalty that trains nothing."""
    out: set[str] = set()
    for s in scope.stmts:  # type: ignore[attr-defined]
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call) \
                and ctx.qualified_name(s.value.func) == "torch.autograd.grad":
            kw = _kw(s.value, "create_graph")
            if kw is not None and not (isinstance(kw.value, ast.Constant) and not kw.value.value):
                out |= _targets(s)
    return out


ITER_WRAPPERS = frozenset({"zip", "enumerate", "reversed", "list", "tuple"})


def _carry(s: ast.stmt, tainted: set[str]) -> None:
    """Gradients kept in a container and read back: ``grads.append(g)`` taints ``grads``;
    ``for g in grads`` / ``for g, m in zip(grads, mean_grads)`` taints the loop names."""
    if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) \
            and isinstance(s.value.func, ast.Attribute) \
            and s.value.func.attr in ("append", "extend") and len(s.value.args) == 1 \
            and dotted(s.value.args[0]) in tainted:
        owner = dotted(s.value.func.value)
        if owner:
            tainted.add(owner)
    elif isinstance(s, ast.For):
        it = s.iter
        items = it.args if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) \
            and it.func.id in ITER_WRAPPERS else [it]
        if any(dotted(a) in tainted for a in items):
            tainted |= {n.id for n in walk(s.target) if isinstance(n, ast.Name)}


def _penalty_return(scope: object, stmt: ast.stmt, tainted: set[str],
                    ctx: Context) -> ast.AST | None:
    """A ``return`` of the penalty from a function named like one (``gradient_penalty``)."""
    fn = getattr(scope, "node", None)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) \
            or not PENALTY_NAME_RE.search(fn.name):
        return None
    return returned_penalty(scope, stmt, tainted, ctx)


def returned_penalty(scope: object, stmt: ast.stmt, tainted: set[str],
                     ctx: Context) -> ast.Return | None:
    """A ``return`` after ``stmt`` that hands out a value made from ``tainted`` through
    arithmetic, reductions and norms (names followed forward)."""
    tainted = set(tainted)
    for s in scope.stmts:  # type: ignore[attr-defined]
        if s.lineno <= stmt.lineno:
            continue
        if isinstance(s, ast.Return) and s.value is not None:
            for t in tainted:
                use = _use(s.value, t)
                if use is not None and _penalty_path(use, s.value, ctx, stmt.lineno):
                    return s
        if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and s.value is not None:
            for t in list(tainted):
                use = _use(s.value, t)
                if use is not None and _penalty_path(use, s.value, ctx, stmt.lineno):
                    tainted |= _targets(s)
                    break
            else:
                _rebound(s, tainted)  # NOTE [penalty name rebound]
    return None


def caller_sink(scope: Scope, ctx: Context) -> ast.Call | None:
    """The backward that a call of ``scope``'s function reaches: the call's result bound to
    names that reach it through arithmetic, reductions and norms (a helper returning a term
    built from a gradient; the call sites of NOTE [parameter kinds], none hidden), the call
    in every loop around the backward (else the term is made once: a fixed target)."""
    fn = scope.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    for call, where in function_sites(ctx.analysis, fn) or ():
        cs = ctx.scope(where)
        s = cs.statement_of(call)
        if isinstance(s, (ast.Assign, ast.AnnAssign)) and s.value is not None \
                and _penalty_path(call, s.value, ctx, call.lineno, cs):
            sink = _tainted_sink(cs, s, _targets(s), ctx)
            if sink is not None and not any(
                    isinstance(x, (ast.For, ast.AsyncFor, ast.While))
                    and x.lineno <= sink.lineno <= (x.end_lineno or x.lineno)
                    and not x.lineno <= call.lineno <= (x.end_lineno or x.lineno)
                    for x in walk(cs.node)):
                return sink
    return None


def _use(e: ast.AST, name: str) -> ast.AST | None:
    for n in walk(e):
        if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Load) \
                and dotted(n) == name:
            return n
    return None


def _uses(e: ast.AST, name: str) -> bool:
    return _use(e, name) is not None
