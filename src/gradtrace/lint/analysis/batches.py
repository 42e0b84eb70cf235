"""Batches unpacked next to a model input: data, not values on the graph.

# NOTE [batch siblings]
``data, targets = get_batch(source, i)``, ``state, action, reward, not_done =
buffer.sample(n)``, ``for inp, target in loader_like:``, ``for i, batch in enumerate(it):`` with
``src = batch.src``: when one name of the unpacking is fed
to the model (the first argument of a call of a model-like callee: ``model(data)``,
``self.critic(state, action)``), the source hands out the model's *input*, upstream of every
parameter; its other elements (targets, rewards, masks) come from the same place and carry no
graph either. Not when the source is itself a model call (``feats, kl = self.encoder(x)``, or a
``self.<layer>(...)``) or a name of the unpacking is made trainable. A module's ``forward`` given
a record (RLlib's ``input_dict``) whose field its layers are given (``flat =
input_dict["obs"]["obs"].float()``, kept as ``self.inputs``, handed to ``self.p_encoder``) is
given its input in that record: the record's other fields (``input_dict["obs"]["action_mask"]``)
are data the same way.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.cuts import MOVES
from gradtrace.lint.analysis.vocabulary import is_model_name
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import of_types, walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope


def batch_unpackings(scope: Scope, ctx: Context) -> frozenset[int]:
    """Ids of the unpacking statements (assignments, ``for`` loops) of ``scope`` whose source
    hands out a model input (NOTE [batch siblings]); cached per function."""
    return ctx.memo("batch-unpackings", scope.node, lambda: _unpackings(scope))


def _model_like(name: str) -> bool:
    return any(is_model_name(p) for p in name.split("."))


def _fed(scope: Scope) -> set[str]:
    """Names read in the first argument of a model-like callee, what they are moved from
    (``x = x.to(device)``) and the batch they are read from (``src = batch.src``)."""
    fed: set[str] = set()
    for node in of_types(scope.node, (ast.Call,)):
        if node.args \
                and is_model_name(dotted(node.func) or ""):
            callees = {id(c.func) for c in of_types(node.args[0], (ast.Call,))}
            fed.update(n.id for n in of_types(node.args[0], (ast.Name,))
                       if id(n) not in callees)  # `critic(torch.cat([s, a], 1))`
    todo = list(fed)
    while todo:
        for b in scope.bindings.get(todo.pop(), ()):
            v = b.value
            while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
                    and v.func.attr in MOVES:
                v = v.func.value
            if isinstance(v, (ast.Attribute, ast.Subscript)) and not (
                    isinstance(v, ast.Attribute) and v.attr in ("data", "grad")):
                v = v.value  # `src = batch.src`, `x = batch["input"]`: the batch it came in
            if isinstance(v, ast.Name) and v.id not in fed:
                fed.add(v.id)
                todo.append(v.id)
    return fed


def _unpackings(scope: Scope) -> frozenset[int]:
    if not isinstance(scope.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return frozenset()
    fed = _fed(scope)
    if not fed:
        return frozenset()
    trainable = {mc.receiver for mc in scope.method_calls if mc.method == "requires_grad_"}
    out: set[int] = set()
    for s in scope.stmts:
        if isinstance(s, ast.Assign) and len(s.targets) == 1:
            target, source = s.targets[0], s.value
        elif isinstance(s, (ast.For, ast.AsyncFor)):
            target, source = s.target, s.iter
        else:
            continue
        if not isinstance(target, (ast.Tuple, ast.List)):
            continue
        names = {n.id for n in walk(target) if isinstance(n, ast.Name)}
        if not names & fed or names & trainable or any(
                scope.bindings.get(n + ".requires_grad") for n in names):
            continue
        if isinstance(source, ast.Call):
            callee = dotted(source.func) or ""
            if not callee or _model_like(callee) or (
                    callee.startswith("self.") and callee.count(".") == 1):
                continue  # the outputs of a model (or of a layer of this module)
        elif isinstance(s, ast.Assign) or not isinstance(source, (ast.Name, ast.Attribute)):
            continue  # `enc_out, h = encoded`: whose outputs those are is not seen here
        out.add(id(s))
    return frozenset(out)


def batch_objects(scope: Scope, ctx: Context) -> frozenset[str]:
    """Names of ``scope`` bound only to a batch object whose field is the model's input
    (``replay_data = self.replay_buffer.sample(n)`` with ``self.q_net(replay_data.observations)``,
    ``for batch in it:`` with ``model(batch.x)``): its other fields (``replay_data.rewards``)
    come from the same place and carry no graph (NOTE [batch siblings]). Not when the object
    is what a model returned, or a name of it is made trainable."""
    return ctx.memo("batch-objects", scope.node, lambda: _objects(scope))


def _objects(scope: Scope) -> frozenset[str]:
    if not isinstance(scope.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return frozenset()
    fields: set[str] = set()  # receivers of a field fed to a model: `model(batch.x)`
    for node in of_types(scope.node, (ast.Call,)):
        if node.args and is_model_name(dotted(node.func) or ""):
            fields.update(n.value.id for n in of_types(node.args[0], (
                ast.Attribute, ast.Subscript)) if isinstance(n.value, ast.Name) and field(n))
    trainable = {mc.receiver for mc in scope.method_calls if mc.method == "requires_grad_"}
    records = _forward_records(scope)
    out: set[str] = set()
    for name in (fields | records) - trainable - {"", "self", "cls"}:
        bs = scope.bindings.get(name, ())
        if (name in records and not bs or bs and all(_drawn(b.stmt, b.value, name) for b in bs)) \
                and not any(k.startswith(name + ".") and k.endswith(".requires_grad")
                            for k in scope.bindings):
            out.add(name)
    return frozenset(out)


def _forward_records(scope: Scope) -> set[str]:
    """Parameters of a module's ``forward`` holding a record whose field, reached through the
    function's own bindings (moves and casts, ``self.inputs = flat``, a helper given it
    first), is what the module's layers are given (``flat = input_dict["obs"]["obs"].float()``
    then ``self.p_encoder(flat)``): the module's input, so the record's other fields
    (``input_dict["obs"]["action_mask"]``) come with it as data (NOTE [batch siblings])."""
    fn = scope.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.name != "forward":
        return set()
    cls = scope.ctx.analysis.class_of(fn)
    if cls is None or not cls.is_module:
        return set()
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args)} - {"self"}
    todo: list[tuple[ast.expr, int]] = [
        (node.args[0], 0) for node in of_types(fn, (ast.Call,))
        if node.args and is_model_name(dotted(node.func) or "")]
    out: set[str] = set()
    seen: set[str] = set()
    while todo:
        v, depth = todo.pop()
        while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
                and v.func.attr in MOVES:
            v = v.func.value
        if isinstance(v, (ast.Subscript, ast.Attribute)) and field(v):
            root = v
            while isinstance(root, (ast.Subscript, ast.Attribute)) and field(root):
                root = root.value
            if isinstance(root, ast.Name) and root.id in params:
                out.add(root.id)
                continue
        if isinstance(v, ast.Call):
            callee = dotted(v.func) or ""
            if v.args and depth < 4 and callee and not _model_like(callee) and not (
                    callee.startswith("self.") and callee.count(".") == 1):
                todo.append((v.args[0], depth + 1))  # `add_time_dimension(flat, ...)`
            continue
        name = dotted(v) if isinstance(v, (ast.Name, ast.Attribute)) else None
        if name is None or name in seen or depth >= 4:
            continue
        seen.add(name)
        todo.extend((b.value, depth + 1) for b in scope.bindings.get(name, ())
                    if b.value is not None)
    return out


def _drawn(s: ast.stmt, v: ast.expr | None, name: str) -> bool:
    """``name = source.sample(n)`` / ``for name in source:``: not a model's output."""
    if isinstance(s, (ast.For, ast.AsyncFor)):
        if not isinstance(s.target, ast.Name):
            return False
        v = s.iter
        if isinstance(v, (ast.Name, ast.Attribute)):
            return True
    if not isinstance(v, ast.Call):
        return False
    callee = dotted(v.func) or ""
    return bool(callee) and not _model_like(callee) and not (
        callee.startswith("self.") and callee.count(".") == 1)


def field(n: ast.AST) -> bool:
    """``batch.x`` or ``batch["x"]``: a record's field (not a tuple element ``out[0]``, not
    ``t.data``/``t.grad``)."""
    if isinstance(n, ast.Attribute):
        return n.attr not in ("data", "grad")
    return isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) \
        and isinstance(n.slice.value, str)
