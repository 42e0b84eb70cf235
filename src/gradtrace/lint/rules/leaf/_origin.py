"""Where a name updated in place became a leaf that requires grad (GT302's origins)."""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.frozen_attrs import call_freezes
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import same_block, walk
from gradtrace.lint.context import Context
from gradtrace.lint.rules.leaf._tensors import (
    grad_factory, grad_leaf_binding, is_optimizer_call, is_parameter_call, is_true,
    reads_grad_of,
)


def parameter_loop_of(scope: Scope, name: str, line: int) -> ast.stmt | None:
    """The ``for`` statement binding ``name`` from ``<m>.parameters()``, if any."""
    b = scope.binding_before(name, line)
    if b is None or not isinstance(b.stmt, (ast.For, ast.AsyncFor)):
        return None
    it = b.stmt.iter
    target = b.stmt.target
    if isinstance(it, ast.Name) and isinstance(target, ast.Name):
        lb = scope.binding_before(it.id, b.line)
        home = scope
        if lb is None and not isinstance(scope.node, ast.Module) and it.id not in scope.bindings:
            home = scope.ctx.scope(scope.ctx.tree)  # a global `params = [w, b]`
            lb = home.binding_before(it.id, 1 << 30)
        if lb is not None and isinstance(lb.value, (ast.List, ast.Tuple)) and any(
                isinstance(e, ast.Name) and grad_leaf_binding(home, e.id, lb.line)
                for e in lb.value.elts):
            return b.stmt  # `for p in params:` over `params = [w, b]` (grad leaves)
        return None
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)):
        return None
    if it.func.attr == "parameters" and isinstance(target, ast.Name):
        return b.stmt
    if it.func.attr == "named_parameters" and isinstance(target, ast.Tuple) \
            and len(target.elts) == 2 and dotted(target.elts[1]) == name:
        return b.stmt
    return None


def calls_backward(scope: Scope) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "backward"
               for s in scope.stmts for n in walk(s))


def requires_grad_set(scope: Scope, name: str, line: int) -> ast.stmt | None:
    """A ``name.requires_grad_()`` / ``name.requires_grad = True`` before ``line`` and after
    the binding of ``name`` that is in effect there (a flag set on an earlier tensor of the
    same name, e.g. in the other branch of an ``if``, says nothing about this one)."""
    b = scope.binding_before(name, line)
    start = b.line if b is not None else 0
    found = None
    for m in scope.method_calls:
        if m.receiver == name and m.method == "requires_grad_" and start < m.stmt.lineno < line:
            found = m.stmt if (not m.call.args or is_true(m.call.args[0])) else None
    for fb in scope.bindings.get(f"{name}.requires_grad", ()):
        if start < fb.line < line:
            found = fb.stmt if is_true(fb.value) else None
    return found


def flagged_leaf(scope: Scope, name: str, line: int) -> ast.stmt | None:
    """``name = <t>.requires_grad_()`` in effect at ``line``, when ``<t>`` holds no graph:
    ``requires_grad_`` returns its receiver, a leaf (a tensor without history is one) that now
    requires grad. Known to hold no graph: a ``.detach()``/``.data`` on the receiver's chain,
    or the update reads ``name.grad`` (only leaves get ``.grad``; were ``<t>`` on the graph,
    ``name.grad`` would be None and the update would fail anyway)."""
    b = scope.binding_before(name, line)
    v = b.value if b is not None and not isinstance(b.stmt, ast.AugAssign) else None
    if not (isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute)
            and v.func.attr == "requires_grad_" and (not v.args or is_true(v.args[0]))):
        return None
    chain = v.func.value
    while isinstance(chain, (ast.Call, ast.Attribute, ast.Subscript)):
        if isinstance(chain, ast.Attribute) and chain.attr in ("detach", "data"):
            return b.stmt  # type: ignore[union-attr]
        chain = chain.func if isinstance(chain, ast.Call) else chain.value
    use = next((s for s in scope.stmts if s.lineno == line), None)
    return b.stmt if use is not None and reads_grad_of(use, name) else None  # type: ignore[union-attr]


def frozen_before(scope: Scope, name: str, line: int) -> bool:
    """``name.requires_grad = False`` (or ``name.requires_grad_(False)``) runs on every path
    before ``line`` in the function's top-level body, and no later ``True`` undoes it; for
    ``layer.weight``, a statement freezing all of ``layer`` counts (``call_freezes``)."""
    frozen = False
    root = name.rpartition(".")[0]
    for s in scope.node.body:  # type: ignore[attr-defined]
        if s.lineno >= line:
            break
        if root and "." not in root and isinstance(s, ast.Expr) \
                and isinstance(s.value, ast.Call) and call_freezes(scope.ctx, s.value, root):
            frozen = True  # the whole layer frozen (`nethook.set_requires_grad(False, layer)`)
            continue
        if isinstance(s, ast.Assign) and any(dotted(t) == name + ".requires_grad"
                                             for t in s.targets):
            frozen = not is_true(s.value)
        elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and \
                dotted(s.value.func) == name + ".requires_grad_":
            frozen = bool(s.value.args) and not is_true(s.value.args[0])
    return frozen


def filled_after_flag(origin: ast.AST, name: str, ctx: Context) -> bool:
    """``res = torch.zeros(n, requires_grad=True)`` (or ``a.requires_grad_()``) and then
    ``res[i] = ...``: a tensor flagged before it is filled, whose gradient nothing in the file
    asks for (no ``name.grad``, no optimizer nor ``autograd.grad`` given it). The flag is the
    mistake, not the fill: the tensor is a result being built, not a weight being trained."""
    if not isinstance(origin, ast.stmt) or isinstance(origin, (ast.For, ast.AsyncFor)) or any(
            is_parameter_call(n, ctx) for n in walk(origin)) or not any(
            grad_factory(n, ctx) is not None or isinstance(n, ast.Attribute)
            and n.attr in ("requires_grad_", "requires_grad") for n in walk(origin)):
        return False
    if reads_grad_of(ctx.tree, name):
        return False
    for n in walk(ctx.tree):
        if isinstance(n, ast.Call) and (is_optimizer_call(n, ctx) or (
                ctx.call_name(n) or "").startswith("torch.autograd.")) and any(
                isinstance(a, (ast.Name, ast.Attribute)) and dotted(a) == name
                for arg in [*n.args, *(k.value for k in n.keywords)] for a in walk(arg)):
            return False
    return True


def flag_cleared_before(scope: Scope, name: str, origin: ast.stmt, stmt: ast.stmt) -> bool:
    """``x.detach_()`` or ``x.requires_grad_(False)`` as a statement of the block holding the
    in-place ``stmt``, after the ``origin`` that made ``x`` require grad and before ``stmt``:
    the flag is off again when ``stmt`` runs (pytracking's Gauss-Newton and gradient-descent
    solvers: ``self.x.detach_()`` then ``self.x += delta_x``)."""
    for m in scope.method_calls:
        if m.receiver != name or not origin.lineno < m.stmt.lineno < stmt.lineno \
                or not isinstance(m.stmt, ast.Expr) or m.stmt.value is not m.call:
            continue
        clears = m.method == "detach_" or m.method == "requires_grad_" and m.call.args \
            and isinstance(m.call.args[0], ast.Constant) and m.call.args[0].value is False
        if clears and same_block(scope.node, m.stmt, stmt):
            return True
    return False


# NOTE [moved leaf kept on the CPU]: ``total = torch.tensor(0.0, requires_grad=True)
# .to(pred.device)`` then ``total += part``. ``Tensor.to`` returns the tensor itself when it
# is already on the device asked for (and of that dtype): a factory given no ``device=`` makes
# its tensor on the CPU, so on a CPU run ``total`` is the factory's leaf that requires grad
# and the in-place add raises (torch 2.13); on another device it is a copy (a non-leaf) and
# the flag was never needed. Only a ``.to`` of one device argument counts: ``x.device``,
# ``torch.device(...)`` of no constant accelerator name, or a name whose every binding in the
# function or the file is one of those (or an ``if``-expression with a ``"cpu"`` arm).
def moved_leaf(scope: Scope, name: str, line: int) -> ast.stmt | None:
    """The binding ``name = <grad factory>.to(<device>)`` in effect at ``line``, else None."""
    b = scope.binding_before(name, line)
    v = b.value if b is not None and not isinstance(b.stmt, ast.AugAssign) else None
    if not (isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute)
            and v.func.attr == "to" and len(v.args) + len(v.keywords) == 1):
        return None
    ctx = scope.ctx
    made = grad_factory(v.func.value, ctx)
    if made is None or ctx.call_name(made) is None \
            or any(k.arg in ("device", None) for k in made.keywords) \
            or ctx.mentions("set_default_device"):
        return None
    arg = v.args[0] if v.args else v.keywords[0].value
    if v.keywords and v.keywords[0].arg != "device":
        return None
    return b.stmt if _device_value(scope, arg, 0) else None  # type: ignore[union-attr]


def _device_value(scope: Scope, e: ast.AST, depth: int) -> bool:
    if isinstance(e, ast.Attribute) and e.attr == "device":
        return True
    if isinstance(e, ast.Constant):
        return e.value == "cpu"
    if isinstance(e, ast.IfExp):
        return any(isinstance(x, ast.Constant) and x.value == "cpu" for x in (e.body, e.orelse))
    if isinstance(e, ast.Call) and scope.ctx.call_name(e) == "torch.device" and e.args:
        return _device_value(scope, e.args[0], depth) or not isinstance(e.args[0], ast.Constant)
    if isinstance(e, ast.Name) and depth < 2:
        binds = scope.bindings.get(e.id) or scope.ctx.scope(scope.ctx.tree).bindings.get(e.id)
        return bool(binds) and all(x.value is not None and not isinstance(x.stmt, ast.AugAssign)
                                   and _device_value(scope, x.value, depth + 1) for x in binds)
    return False
