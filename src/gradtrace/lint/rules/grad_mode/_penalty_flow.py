"""GT206's data flow: whether an ``autograd.grad`` result reaches a backward or a returned
penalty only through arithmetic, reductions and norms (names followed forward, through
containers and loops), and the gradients that already have a graph. Read by
:mod:`.autograd_calls` (``_kw`` too, which GT205 shares)."""
from __future__ import annotations

import ast
import re

from gradtrace.lint.analysis.cuts import is_functional_loss, is_torch_loss
from gradtrace.lint.analysis.facts import unpacked_value
from gradtrace.lint.analysis.steps import backward_loss, plain_grads
from gradtrace.lint.context import Context
from gradtrace.lint.flow import DETACHED, LEAF, Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import child_nodes, walk

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


def _torch_loss_call(call: ast.Call, inner: ast.AST, ctx: Context, origin: int) -> bool:
    """A torch loss (``F.mse_loss(...)``, ``nn.MSELoss()(...)``, or a name bound only to
    ``torch.nn.<X>Loss(...)``) whose other arguments are gradients without a graph too:
    force matching ``mse(true_forces, forces)`` with both from ``autograd.grad`` without
    ``create_graph`` is a constant term. Next to a value that may have a graph (a model's
    output, a gradient made with ``create_graph=True``) the gradient is a target: not followed.
    The other gradients must be bound before ``origin`` (the line of the gradient followed):
    the one made last, from the model being trained, is the prediction, not the target."""
    if not _loss_callee(call.func, ctx):
        return False
    scope = ctx.scope()
    return all(a is inner or _plain_value(a, scope, ctx, 0) and all(
        b.line < origin for n in walk(a) if isinstance(n, ast.Name)
        for b in scope.bindings.get(n.id, ())) or _graphless_data(a, scope, call)
        for a in call.args)


def _graphless_data(a: ast.expr, scope: Scope, call: ast.Call) -> bool:
    """``a`` is data with no graph where the loss reads it: a new tensor, a detached value or
    one computed only from such (``z = (5 * torch.cos(x)).sum(-1)``, ``x = torch.randn(...)``),
    by the flow's kinds, and no name it is made from is set to require grad before it is
    computed. The gradient compared with it is the prediction (derivative matching, Sobolev
    training: pytorch issue "loss_z has grad_fn None"), so without a graph the term is a
    constant, as beside another plain gradient."""
    if scope.kind(a, call.lineno) not in (LEAF, DETACHED):
        return False
    names = _made_from(a, scope, call.lineno, 0)
    if names is None or _asks_grad(a):
        return False
    for s in walk(scope.node):
        target = _requires_grad_target(s)
        if target is None or target[0] not in names:
            continue
        made = names[target[0]]
        if target[1] <= made or any(lo <= made <= hi for lo, hi in _loops_around(
                scope.node, target[1])):
            return False
    return True


def _made_from(e: ast.AST, scope: Scope, line: int, depth: int) -> dict[str, int] | None:
    """The names ``e`` is computed from, through their bindings before ``line``, each with the
    line where it is read (None: a binding that is not a plain assignment)."""
    out: dict[str, int] = {}
    if depth > 6:
        return None
    for n in _unless_cut(e):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            b = scope.binding_before(n.id, line)
            if b is None:
                continue
            if not isinstance(b.stmt, (ast.Assign, ast.AnnAssign)) or b.value is None \
                    or _asks_grad(b.value):
                return None
            out[n.id] = min(out.get(n.id, line), line)
            inner = _made_from(b.value, scope, b.line, depth + 1)
            if inner is None:
                return None
            for k, v in inner.items():
                out[k] = min(out.get(k, v), v)
    return out


def _unless_cut(e: ast.AST) -> list[ast.AST]:
    """The nodes of ``e`` outside ``.detach()`` calls and ``.data`` reads (what is cut there
    carries no graph whatever it is made from)."""
    out: list[ast.AST] = []
    todo = [e]
    while todo:
        n = todo.pop()
        out.append(n)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr == "detach" or isinstance(n, ast.Attribute) and n.attr == "data":
            continue
        todo.extend(ast.iter_child_nodes(n))
    return out


def _asks_grad(e: ast.AST) -> bool:
    """``torch.zeros(3, requires_grad=True)``, ``t.requires_grad_()``: a leaf that trains."""
    return any(isinstance(n, ast.keyword) and n.arg == "requires_grad"
               or isinstance(n, ast.Attribute) and n.attr == "requires_grad_"
               for n in _unless_cut(e))


def _requires_grad_target(s: ast.AST) -> tuple[str, int] | None:
    """(name, line) of ``name.requires_grad = ...`` or ``name.requires_grad_(...)``."""
    if isinstance(s, ast.Assign):
        for t in s.targets:
            if isinstance(t, ast.Attribute) and t.attr == "requires_grad" \
                    and isinstance(t.value, ast.Name):
                return t.value.id, s.lineno
    if isinstance(s, ast.Call) and isinstance(s.func, ast.Attribute) \
            and s.func.attr == "requires_grad_" and isinstance(s.func.value, ast.Name):
        return s.func.value.id, s.lineno
    return None


def _loops_around(fn: ast.AST, line: int) -> list[tuple[int, int]]:
    return [(n.lineno, n.end_lineno or n.lineno) for n in walk(fn)
            if isinstance(n, (ast.For, ast.AsyncFor, ast.While))
            and n.lineno <= line <= (n.end_lineno or n.lineno)]


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


def _penalty_path(inner: ast.AST, root: ast.AST, ctx: Context, origin: int = 0) -> bool:
    """Whether ``inner`` reaches ``root`` only through arithmetic, reductions and norms (or a
    torch loss beside plain gradients bound before line ``origin``: :func:`_torch_loss_call`)."""
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
            if q not in PENALTY_FUNCS and not _torch_loss_call(p, n, ctx, origin):
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
                if any(_uses(loss, t) and _penalty_path(_use(loss, t), loss, ctx, stmt.lineno) or dotted(loss) == t
                       for t in tainted) and not any(_uses(loss, g) for g in graphed):
                    return n
        if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and s.value is not None \
                and not any(_uses(s.value, g) for g in graphed):
            for t in list(tainted):
                use = _use(s.value, t)
                if use is not None and _penalty_path(use, s.value, ctx, stmt.lineno):
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
                if use is not None and _penalty_path(use, s.value, ctx, stmt.lineno):
                    return s
        if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and s.value is not None:
            for t in list(tainted):
                use = _use(s.value, t)
                if use is not None and _penalty_path(use, s.value, ctx, stmt.lineno):
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
