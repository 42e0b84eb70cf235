"""What a function does with its arguments, read from its calls: which ones it feeds to a
model (its input data) and which ones it hands to a torch loss function as the prediction.
Pure functions of one scope (cached on the context)."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.cuts import MOVES, is_functional_loss, peel
from gradtrace.lint.analysis.vocabulary import LOSS_NAME_RE, is_model_name
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope



def loss_inputs(scope: Scope, ctx: Context) -> frozenset[str]:
    """Names the function hands to a loss as its *input* (first argument:
    ``F.cross_entropy(y, pseudo_labels)``, ``losses.l2_loss(a, ref)`` of a callee named like
    a loss): a prediction whatever its name, as a target never goes there. A slice of a name
    (``y[:, :2]``) and the names it was sliced from (``u, a = y[:, 0:1], y[:, 1:2]``) count:
    a physics-informed loss reads the network's output ``y`` that way. What the function turns
    into log-probabilities (``F.log_softmax(y, 1)``) is a prediction too: a class label cannot
    go there, and a distillation's teacher is given as probabilities (PVCNN's ``kl_loss(x,
    y)``: ``x`` detached, ``y`` the student's logits)."""
    def make() -> frozenset[str]:
        out = set()
        for node in walk(scope.node):
            if isinstance(node, ast.Call) and node.args and _loss_callee(node, ctx):
                out.update(_predicted(node.args[0], scope, 0))
            elif isinstance(node, ast.Call) and (lp := _log_probs_of(node, ctx)) is not None:
                out.update(_predicted(lp, scope, 0))
        todo = list(out)
        while todo:
            for b in scope.bindings.get(todo.pop(), ()):
                src = _sliced_name(_bound_part(b.stmt, b.name) if b.value is None else b.value)
                if src is not None and src not in out:
                    out.add(src)
                    todo.append(src)
        return frozenset(out)
    return ctx.memo("arg-roles-loss-inputs", scope.node, make)


def _predicted(e: ast.expr, scope: Scope, depth: int) -> set[str]:
    """The names a loss's first argument reads as its prediction: the name or a slice of it;
    through a local name bound once, the parts of ``torch.cat([...])``, and a difference of two
    slices of one name (``y[a:b] - y[c:d]``, a periodic boundary term: a loss of data alone
    would be a constant)."""
    name = _sliced_name(e)
    if name is not None:
        bs = scope.bindings.get(name, ())
        if depth < 4 and len(bs) == 1 and isinstance(bs[0].value, (ast.Call, ast.BinOp)):
            return {name} | _predicted(bs[0].value, scope, depth + 1)
        return {name}
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
        a, b = _sliced_name(e.left), _sliced_name(e.right)
        return {a} if a is not None and a == b else set()
    if depth < 4 and isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and \
            e.func.attr in ("cat", "concat", "concatenate", "stack") and e.args and \
            isinstance(e.args[0], (ast.List, ast.Tuple)):
        return {n for x in e.args[0].elts for n in _predicted(x, scope, depth + 1)}
    return set()


def _log_probs_of(call: ast.Call, ctx: Context) -> ast.expr | None:
    """``y`` of ``F.log_softmax(y, 1)``, ``torch.log_softmax(y, -1)``, ``y.log_softmax(-1)``."""
    q = ctx.qualified_name(call.func) or ""
    if q in ("torch.nn.functional.log_softmax", "torch.log_softmax") and call.args:
        return call.args[0]
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr == "log_softmax" and not q.startswith("torch."):
        return f.value
    return None


def _loss_callee(call: ast.Call, ctx: Context) -> bool:
    if is_functional_loss(ctx.qualified_name(call.func) or ""):
        return True
    name = dotted(call.func) or ""
    return not name.startswith(("torch.", "F.", "nn.")) and bool(
        LOSS_NAME_RE.search(name.rpartition(".")[2]))


def _sliced_name(e: ast.expr | None) -> str | None:
    """``y`` for ``y``, ``y[:, 1:2]``, ``y[0][:, :2]``, ``y.detach()`` (the value under cut and
    copy methods is still what the loss is handed); None for anything else."""
    while isinstance(e, ast.Subscript) or e is not None and peel(e) is not e:
        e = e.value if isinstance(e, ast.Subscript) else peel(e)
    return e.id if isinstance(e, ast.Name) else None


def _bound_part(stmt: ast.stmt, name: str) -> ast.expr | None:
    """In ``u, a = y[:, 0:1], y[:, 1:2]``, the element bound to ``name``."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(
            stmt.targets[0], ast.Tuple) and isinstance(stmt.value, ast.Tuple) and len(
            stmt.targets[0].elts) == len(stmt.value.elts):
        for t, v in zip(stmt.targets[0].elts, stmt.value.elts):
            if isinstance(t, ast.Name) and t.id == name:
                return v
    return None


def model_fed(scope: Scope) -> set[str]:
    """Names the function passes first to a callee named like a model (``self.model(x)``,
    ``net(inputs)``), and the names they were bound from through moves (``x = batch_data``,
    ``x = x.to(device).float()``)."""
    fed = set()
    for node in walk(scope.node):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name) and \
                is_model_name(dotted(node.func) or ""):
            fed.add(node.args[0].id)
    todo = list(fed)
    while todo:
        for b in scope.bindings.get(todo.pop(), ()):
            v = b.value
            while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and \
                    v.func.attr in MOVES:
                v = v.func.value
            if isinstance(v, ast.Name) and v.id not in fed:
                fed.add(v.id)
                todo.append(v.id)
    return fed
