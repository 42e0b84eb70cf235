"""GT466: a loss all-reduced in place (not recorded) and then scaled (recorded) before its
backward."""
from __future__ import annotations

import ast
import dataclasses
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import statements, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.distributed.sync import _reaches_backward

# the in-place c10d collectives: autograd records none of them (torch 2.13 warns that
# `c10d::allreduce_` has no autograd kernel)
IN_PLACE = frozenset({"torch.distributed.all_reduce", "torch.distributed.reduce",
                      "torch.distributed.broadcast"})
SCALES_IN_PLACE = frozenset({"div_", "mul_", "true_divide_", "divide_", "multiply_"})
SCALE_OPS = (ast.Div, ast.Mult)
CUTS = frozenset({"detach", "item", "data", "numpy", "tolist"})
FACTORIES = frozenset({"tensor", "as_tensor", "zeros", "ones", "full", "empty", "zeros_like",
                       "ones_like", "full_like", "empty_like"})


def _scale_of(s: ast.stmt, name: str) -> ast.AST | None:
    """Where ``s`` scales ``name`` itself: ``name.div_(n)``, ``name /= n``, ``name = name /
    n``."""
    if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
        f = s.value.func
        if isinstance(f, ast.Attribute) and f.attr in SCALES_IN_PLACE \
                and isinstance(f.value, ast.Name) and f.value.id == name:
            return s.value
    if isinstance(s, ast.AugAssign) and isinstance(s.op, SCALE_OPS) \
            and isinstance(s.target, ast.Name) and s.target.id == name:
        return s
    if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) \
            and s.targets[0].id == name and isinstance(s.value, ast.BinOp) \
            and isinstance(s.value.op, SCALE_OPS) and isinstance(s.value.left, ast.Name) \
            and s.value.left.id == name:
        return s
    return None


def _graph_value(fn: ast.AST, name: str, line: int) -> bool:
    """``name`` was last bound before ``line`` to a computed value (a call, arithmetic), not
    cut from the graph (``.detach()``, ``.item()``, ``.data``), nor a constant or a
    fresh tensor (``torch.tensor(...)``, ``torch.zeros(...)``)."""
    best: ast.AST | None = None
    for s in statements(fn):
        if s.lineno >= line:
            break
        if isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                             for t in s.targets):
            best = s.value
    if best is None or isinstance(best, (ast.Constant, ast.Name)):
        return False
    if isinstance(best, ast.Call) and isinstance(best.func, ast.Attribute) \
            and best.func.attr in FACTORIES:
        return False  # `torch.tensor(loss.item())`, `torch.zeros(1)`: a fresh tensor
    return isinstance(best, (ast.Call, ast.BinOp)) and not any(
        isinstance(n, ast.Attribute) and n.attr in CUTS for n in walk(best))


class LossReducedInPlaceThenScaled(Rule):
    """`dist.all_reduce(loss)` and then `loss.div_(world_size)` (or `loss /= n`) before
    `loss.backward()`: the backward sees the scaling, not the reduction.

    Why: the in-place c10d collectives (`dist.all_reduce`, `dist.reduce`, `dist.broadcast`)
    are not recorded by autograd (torch 2.13 only warns that `c10d::allreduce_` has no
    autograd kernel), but the division that follows them is. Meant to average the loss over
    the ranks for logging, the pair leaves the backward with the local loss divided by the
    world size: every rank's gradient is `1 / world_size` of what it should be, and
    DistributedDataParallel averages it again (an lr silently divided by the number of GPUs;
    NVIDIA/apex#664, checked on torch 2.13 with two ranks). Reduce a detached copy for
    logging (`logged = loss.detach().clone(); dist.all_reduce(logged); logged /= n`) and call
    `backward()` on the loss itself.
    A loss module's `forward` that reduces in place a value computed from its inputs and
    returns a loss read from it (Barlow Twins' cross-correlation: `c = c / world_size;
    dist.all_reduce(c)`) is the same mistake: the backward sees only this rank's share; it is
    reported at the collective (NOTE [reduced in place inside a loss]): use
    `c = torch.distributed.nn.all_reduce(c)`, which records the reduction.
    Known limits: the collective, the scaling and the `backward()` are in one function, on a
    name bound there to a computed value; in a `forward`, the value is followed through the
    function's own assignments only.
    """

    code = "GT466"
    name = "loss-reduced-in-place-then-scaled"
    message = ("`{scale}` scales `{loss}` after `{reduce}` (line {line}), which autograd does "
               "not record: the `backward()` on line {bwd} sees only the scaling, so the "
               "gradient is the local one divided (or multiplied) as if it were the reduced "
               "value; reduce a detached copy for logging and backpropagate the loss itself")
    triggers = ("all_reduce", "broadcast", "reduce(")
    gate_statements = "function"
    examples = [
        Bad("""
            import torch.distributed as dist

            def train_step(model, opt, x, y, world_size):
                loss = ((model(x) - y) ** 2).mean()
                dist.all_reduce(loss)
                loss.div_(world_size)
                opt.zero_grad()
                loss.backward()
                opt.step()
            """, at=(6, 4)),
        Good("""
            import torch.distributed as dist

            def train_step(model, opt, x, y, world_size):
                loss = ((model(x) - y) ** 2).mean()
                logged = loss.detach().clone()
                dist.all_reduce(logged)
                logged.div_(world_size)
                opt.zero_grad()
                loss.backward()
                opt.step()
            """),
        Bad("""
            import torch
            import torch.distributed as dist

            class CorrelationLoss(torch.nn.Module):
                def forward(self, z_a, z_b):
                    c = z_a.T @ z_b / z_a.size(0)
                    c = c / dist.get_world_size()
                    dist.all_reduce(c)
                    return (torch.diagonal(c) - 1).pow(2).sum()

            def train_step(model, crit, opt, x0, x1):
                crit(model(x0), model(x1)).backward()
                opt.step()
            """, at=(8, 8)),
        Good("""
            import torch
            import torch.distributed as dist
            import torch.distributed.nn

            class CorrelationLoss(torch.nn.Module):
                def forward(self, z_a, z_b):
                    c = z_a.T @ z_b / z_a.size(0)
                    c = torch.distributed.nn.all_reduce(c / dist.get_world_size())
                    counts = (z_a > 0).sum(0)
                    dist.all_reduce(counts)
                    return (torch.diagonal(c) - 1).pow(2).sum() + 0 * counts.sum()

            def train_step(model, crit, opt, x0, x1):
                crit(model(x0), model(x1)).backward()
                opt.step()
            """),
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        if not ctx.mentions(".backward("):
            return
        if ".backward(" not in ctx.code_of(node):
            yield from self._in_forward(node, ctx)
            return
        reduced: dict[str, ast.Call] = {}
        for s in statements(node):
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) \
                    and (ctx.qualified_name(s.value.func) or "") in IN_PLACE \
                    and s.value.args and isinstance(s.value.args[0], ast.Name):
                name = s.value.args[0].id
                if _graph_value(node, name, s.lineno):
                    reduced[name] = s.value
                continue
            for name, red in list(reduced.items()):
                scale = _scale_of(s, name)
                if scale is None:
                    if any(isinstance(t, ast.Name) and t.id == name for t in (
                            s.targets if isinstance(s, ast.Assign) else ())):
                        del reduced[name]  # rebound to something else
                    continue
                del reduced[name]
                bwd = _reaches_backward(node, s, {name}) or self._backward_on(node, s, name)
                if bwd is None:
                    continue
                yield self.report(scale, ctx, related=(Related(
                    ctx.path, red.lineno, "reduced across the ranks here, unrecorded",
                    ctx.column(red)),), scale=" ".join(ctx.source(scale).split())[:50],
                    loss=name, reduce=ctx.source(red)[:50], line=red.lineno, bwd=bwd.lineno)


    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def _in_forward(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        """# NOTE [reduced in place inside a loss]
        A loss module's ``forward`` that all-reduces in place a value computed from its inputs
        (lightly's Barlow Twins: ``c = z_a.T @ z_b / N; c = c / world_size; dist.all_reduce(c)``)
        and returns a loss read from it: the forward value is the global one, but the backward
        only sees this rank's share (``c / world_size``), and DDP averages the gradients again
        (checked on torch 2.13 with two gloo ranks: the gradient is ``1 / world_size`` of the
        global-batch one). Reported at the collective: ``torch.distributed.nn.all_reduce(c)``
        records the reduction. A value computed from no input, cut by ``.detach()``/``.item()``
        or a comparison (a count), reduced under ``no_grad``, or not read into the result:
        silent."""
        info = ctx.analysis.class_of(node)
        if node.name != "forward" or info is None or not info.is_module \
                or not ctx.mentions(".backward("):
            return
        scope = ctx.scope(node)
        for s in statements(node):
            if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
                    and (ctx.qualified_name(s.value.func) or "") in IN_PLACE
                    and s.value.args and isinstance(s.value.args[0], ast.Name)):
                continue
            name = s.value.args[0].id
            if scope.grad_off_at(s) is not None or not _graph_value(node, name, s.lineno) \
                    or not _from_inputs(node, name, s.lineno) \
                    or not _reaches_return(node, s, name):
                continue
            f = self.report(s.value, ctx, scale="", loss=name, reduce="", line=0, bwd=0)
            yield dataclasses.replace(f, message=(
                f"`{ctx.source(s.value)[:50]}` reduces `{name}` in place, which autograd does not "
                f"record: the loss this `forward` returns is computed from the reduced value, but "
                f"its backward sees only this rank's `{name}`, so each rank's gradient lacks the "
                f"other ranks' share (and DDP averages it again); use "
                f"`{name} = torch.distributed.nn.all_reduce({name})`"))

    @staticmethod
    def _backward_on(fn: ast.AST, after: ast.stmt, name: str) -> ast.Call | None:
        """``name.backward()`` after ``after`` (the scaled name itself)."""
        for s in statements(fn):
            if s.lineno <= after.lineno:
                continue
            for n in walk(s):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                        and n.func.attr == "backward" and isinstance(n.func.value, ast.Name) \
                        and n.func.value.id == name:
                    return n
        return None


# ops whose result takes no gradient from their input: a value made with one is a count or an
# index, not a statistic of the inputs to differentiate
NO_GRAD_OPS = frozenset({"argmax", "argmin", "bincount", "long", "int", "bool", "sign", "round",
                         "floor", "ceil", "eq", "ne", "gt", "lt", "ge", "le", "nonzero",
                         "one_hot", "histc"})


def _from_inputs(fn: ast.FunctionDef, name: str, line: int) -> bool:
    """``name`` at ``line`` is computed (through the assignments before it) from an input of
    ``fn`` with no cut (``.detach()``, ``.item()``) and no op that takes no gradient
    (NOTE [reduced in place inside a loss])."""
    a = fn.args
    inputs = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)} - {"self"}
    want = {name}
    for s in reversed([s for s in statements(fn) if s.lineno < line]):
        targets = s.targets if isinstance(s, ast.Assign) else [s.target] if isinstance(
            s, ast.AugAssign) else []
        hit = {n.id for t in targets for n in walk(t) if isinstance(n, ast.Name)} & want
        if not hit:
            continue
        if any(isinstance(n, ast.Compare) or isinstance(n, ast.Attribute) and (
                n.attr in CUTS or n.attr in NO_GRAD_OPS) for n in walk(s.value)):
            return False
        want |= {n.id for n in walk(s.value) if isinstance(n, ast.Name)}
    return bool(want & inputs)


def _reaches_return(fn: ast.FunctionDef, start: ast.stmt, name: str) -> bool:
    """A ``return`` after ``start`` reads ``name`` (through the assignments after it)."""
    tainted, after = {name}, False
    for s in statements(fn):
        if s is start:
            after = True
            continue
        if not after:
            continue
        loads = {n.id for n in walk(s) if isinstance(n, ast.Name)} if not isinstance(
            s, (ast.Assign, ast.AugAssign)) else {n.id for n in walk(s.value)
                                                  if isinstance(n, ast.Name)}
        if isinstance(s, ast.Return) and loads & tainted:
            return True
        if isinstance(s, (ast.Assign, ast.AugAssign)) and loads & tainted:
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            tainted |= {n.id for t in targets for n in walk(t) if isinstance(n, ast.Name)}
    return False
