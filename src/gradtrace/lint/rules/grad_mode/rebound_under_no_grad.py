"""GT216: a model output with a graph is rebound from itself under `no_grad`, then trained on."""
from __future__ import annotations

import ast
import dataclasses
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.analysis.graph_deps import graphs
from gradtrace.lint.analysis.graphless_returns import graphless_call
from gradtrace.lint.analysis.instance_calls import passed_values
from gradtrace.lint.analysis.reach import disables_grad

# calls that make a result carry no graph anyway (a metric, a label)
NUMBER_METHODS = frozenset({"item", "tolist", "numpy", "argmax", "argmin", "detach", "cpu"})


def _names(e: ast.AST) -> set[str]:
    return {n.id for n in walk(e) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _live(name: str, scope: Scope, block: ast.With, ctx: Context) -> ast.AST | None:
    """The call that gave ``name`` its value before the ``block`` with gradients on, when it
    runs a module or a method of the class (``pred = self.model(x)``, ``pred =
    self._forward(...)``); not a binding in another arm of an ``if`` than the block (``if
    grads: data = f(data)`` / ``else: with torch.no_grad(): data = f(data)``: one or the
    other runs, and the block's value is the one meant to carry no graph)."""
    b = scope.binding_before(name, block.lineno)
    v = b.value if b is not None else None
    if b is None or b.no_grad or not isinstance(v, ast.Call) \
            or scope.grad_off_at(b.stmt) is not None or scope.exclusive(b.stmt, block):
        return None
    f = v.func
    if isinstance(f, ast.Attribute) and f.attr in NUMBER_METHODS:
        return None
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
        # a method or a submodule of the class; not a method whose every return has no graph
        return None if graphless_call(ctx, scope.node, v) else v
    if isinstance(f, (ast.Name, ast.Attribute)) and ctx.analysis.is_module(f, scope, b.line):
        return v
    return None


def _passed_live(name: str, fn: ast.AST, scope: Scope, line: int,
                 ctx: Context) -> ast.Call | None:
    """# NOTE [forward input rebound under no_grad]
    ``name`` is an input of a module's ``forward``, not bound before ``line``, and a call of
    an instance (``encoder.forward(torch.cat((real, fake)))``, ``encoder(fake)``) passes for it
    a value that carries a graph (NOTE [graph-carrying bindings]): the call, else None.
    Coqui TTS's speaker encoder computes its spectrogram from the waveform under no_grad, so
    the speaker-consistency loss on the generated waveform trains nothing."""
    if not isinstance(fn, FUNCTION_TYPES) or fn.name != "forward" \
            or name not in {a.arg for a in (*fn.args.posonlyargs, *fn.args.args)[1:]} \
            or scope.binding_before(name, line) is not None:
        return None
    info = ctx.analysis.class_of(fn)
    if info is None or not info.is_module:
        return None
    for value, where in passed_values(ctx, fn, name) or ():  # type: ignore[arg-type]
        call = _call_of(value, where, ctx)
        s = ctx.scope(where)
        g = graphs(s)
        if call is not None and s.grad_off_at(call) is None and any(
                g.carries(b) for b in g.deps(value, call.lineno).bindings):
            return call
    return None


def _call_of(value: ast.AST, where: ast.AST, ctx: Context) -> ast.Call | None:
    for n in walk(where):
        if isinstance(n, ast.Call) and any(a is value for a in (
                *n.args, *(k.value for k in n.keywords))):
            return n
    return None


def _only_input(body: list[ast.stmt], name: str) -> bool:
    """Every statement of the block (through ``if``) rebinds ``name`` or calls a method of
    it (``x.squeeze_(1)``): the block exists for the input, so it is the line to change."""
    for s in body:
        if isinstance(s, ast.If):
            if not _only_input(s.body + s.orelse, name):
                return False
        elif isinstance(s, ast.Assign):
            if not (len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                    and s.targets[0].id == name):
                return False
        elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
            f = s.value.func
            if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                    and f.value.id == name):
                return False
        else:
            return False
    return True


class LiveOutputReboundUnderNoGrad(Rule):
    """A model output that carries a graph is rebound from itself inside `with torch.no_grad():`
    and the new value is then used in the loss.

    Why: under `no_grad` nothing is recorded, so `pred = mapper(pred)` in the block replaces
    the prediction (and its graph back to the model) with a tensor without history. The loss
    term built from it is a constant: it adds nothing to any gradient, so the model is trained
    by the other terms only, silently (or backward raises `element 0 of tensors does not
    require grad` when it is the only term). Consistency models map the student prediction
    with the EMA network this way by mistake (Consistency Policy's CTM loss; checked on torch
    2.13). Keep the stop-gradient for the target only: map the prediction outside the block,
    or bind the block's results to new names.
    Known limits: the output must be bound in the same function from a call of a module or of a
    method of the class with gradients on, rebound in the block from an expression that reads
    it, and read afterwards by what the function returns or calls `backward()` on.
    """

    code = "GT216"
    name = "live-output-rebound-under-no-grad"
    message = ("`{name}` (the output of `{call}`, line {line}) is rebound inside `with "
               "{mode}:`: the new `{name}` has no graph, so the loss term built from it trains "
               "nothing; compute it outside the block (or give the block's result a new name)")
    triggers = ("no_grad", "inference_mode")
    gate_statements = "function"
    examples = [
        Bad("""
            import torch
            import torch.nn as nn
            import torch.nn.functional as F
            student, ema = nn.Linear(4, 4), nn.Linear(4, 4)
            def loss_fn(x, y):
                pred = student(x)
                with torch.no_grad():
                    target = ema(y)
                    pred = ema(pred)
                return F.mse_loss(pred, target) + F.mse_loss(student(y), y)
            """, at=(9, 8)),
        Good("""
            import torch
            import torch.nn.functional as F
            def loss_fn(model, ema, x, y):
                pred = model(x)
                with torch.no_grad():
                    target = ema(y)
                    pseudo = ema(pred)
                    acc = (pred.argmax(-1) == y).float().mean()
                return F.mse_loss(pred, target) + F.mse_loss(pred, pseudo), acc
            """),
    ]

    def visit_With(self, node: ast.With, ctx: Context) -> Iterator[Finding]:
        fn = ctx.function
        if fn is None or len(node.items) != 1 or not disables_grad(
                node.items[0].context_expr, ctx):
            return
        if not any(isinstance(s, ast.Assign) and len(s.targets) == 1
                   and isinstance(s.targets[0], ast.Name)
                   and s.targets[0].id in _names(s.value) for s in node.body):
            return
        scope = ctx.scope(fn)
        off = scope.grad_off_at(node.body[0]) if node.body else None
        if off is not node:
            return
        for s in node.body:
            if not (isinstance(s, ast.Assign) and len(s.targets) == 1
                    and isinstance(s.targets[0], ast.Name)):
                continue
            name = s.targets[0].id
            if name not in _names(s.value):
                continue
            call = _live(name, scope, node, ctx)
            passed = _passed_live(  # NOTE [forward input rebound under no_grad]
                name, fn, scope, node.lineno, ctx) if call is None else None
            if passed is not None and _reaches_loss(name, node, fn):
                at = node if _only_input(node.body, name) else s
                f = self.report(at, ctx, related=[Related(
                    ctx.path, passed.lineno, f"`{ctx.source(passed)[:60]}` passes a value "
                    "with its graph here", ctx.column(passed))], name=name, call="",
                    line=0, mode="")
                yield dataclasses.replace(f, message=(
                    f"`{name}`, the input of this `forward`, is rebound inside `with "
                    f"{ctx.source(node.items[0].context_expr)}:`: the caller on line "
                    f"{passed.lineno} passes a value that carries a graph, and what this module "
                    f"returns is computed from the new `{name}`, which has none: the loss built "
                    "from its result gives that value no gradient; run the input's processing "
                    "with grad"))
                return
            if call is None or not _reaches_loss(name, node, fn):
                continue
            yield self.report(s, ctx, related=[Related(
                ctx.path, call.lineno, f"`{name}` is computed here with its graph",
                ctx.column(call))], name=name, call=ctx.source(call.func),
                line=call.lineno, mode=ctx.source(node.items[0].context_expr))
            return


def _reaches_loss(name: str, block: ast.With, fn: ast.AST) -> bool:
    """``name`` (as the block leaves it) flows, through later assignments of the function,
    into what it returns or a ``backward()`` receiver."""
    tainted = {name}
    end = block.end_lineno or block.lineno
    stmts = sorted((s for s in walk(fn) if isinstance(s, ast.stmt)
                    and not isinstance(s, (*FUNCTION_TYPES, ast.ClassDef))
                    and s.lineno > end), key=lambda s: s.lineno)
    for s in stmts:
        if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and s.value is not None:
            if _names(s.value) & tainted and not _cut(s.value):
                targets = s.targets if isinstance(s, ast.Assign) else [s.target]
                for t in targets:
                    while isinstance(t, (ast.Subscript, ast.Attribute)):
                        t = t.value
                    tainted |= {n.id for n in walk(t) if isinstance(n, ast.Name)}
            elif isinstance(s, ast.Assign):
                tainted -= {t.id for t in s.targets if isinstance(t, ast.Name)}
        elif isinstance(s, ast.Return) and s.value is not None:
            if not isinstance(s.value, ast.Tuple) and _names(s.value) & tainted \
                    and not _cut(s.value):
                return True
        elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) \
                and isinstance(s.value.func, ast.Attribute) and s.value.func.attr == "backward" \
                and _names(s.value.func.value) & tainted:
            return True
    return False


def _cut(e: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr in NUMBER_METHODS for n in walk(e))
