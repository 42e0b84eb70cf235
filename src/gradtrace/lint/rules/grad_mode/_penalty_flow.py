"""GT206's data flow: whether an ``autograd.grad`` result reaches a backward or a returned
penalty only through arithmetic, reductions and norms (names followed forward, through
containers and loops), and the gradients that already have a graph. Read by
:mod:`.autograd_calls` (``_kw`` too, which GT205 shares)."""
from __future__ import annotations

import ast
import re

from gradtrace.lint.analysis.steps import backward_loss
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import child_nodes, walk

PENALTY_NAME_RE = re.compile(r"penalty|(^|_)gp($|_)|(^|_)r1($|_)|lipschitz", re.IGNORECASE)
PENALTY_METHODS = frozenset({
    "norm", "pow", "sum", "mean", "square", "abs", "sqrt", "view", "reshape", "flatten", "sub",
    "add", "mul", "clamp", "relu", "max", "amax", "contiguous", "float", "to"})
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


def _penalty_path(inner: ast.AST, root: ast.AST, ctx: Context) -> bool:
    """Whether ``inner`` reaches ``root`` only through arithmetic, reductions and norms."""
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
            if q not in PENALTY_FUNCS:
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
                if any(_uses(loss, t) and _penalty_path(_use(loss, t), loss, ctx) or dotted(loss) == t
                       for t in tainted) and not any(_uses(loss, g) for g in graphed):
                    return n
        if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and s.value is not None \
                and not any(_uses(s.value, g) for g in graphed):
            for t in list(tainted):
                use = _use(s.value, t)
                if use is not None and _penalty_path(use, s.value, ctx):
                    tainted |= _targets(s)
        _carry(s, tainted)
    return None


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
    for s in scope.stmts:  # type: ignore[attr-defined]
        if s.lineno <= stmt.lineno:
            continue
        if isinstance(s, ast.Return) and s.value is not None:
            for t in tainted:
                use = _use(s.value, t)
                if use is not None and _penalty_path(use, s.value, ctx):
                    return s
        if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and s.value is not None:
            for t in list(tainted):
                use = _use(s.value, t)
                if use is not None and _penalty_path(use, s.value, ctx):
                    tainted |= _targets(s)
    return None


def _use(e: ast.AST, name: str) -> ast.AST | None:
    for n in walk(e):
        if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Load) \
                and dotted(n) == name:
            return n
    return None


def _uses(e: ast.AST, name: str) -> bool:
    return _use(e, name) is not None
