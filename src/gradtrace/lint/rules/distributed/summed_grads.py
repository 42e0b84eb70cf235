"""GT472: gradients all-reduced with the default SUM and never divided by the world size."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.distributed._ddp import wraps

REDUCE = "torch.distributed.all_reduce"
WORLD = frozenset({"torch.distributed.get_world_size"})
# in-place tensor methods that rescale their receiver
SCALES = frozenset({"div_", "mul_", "true_divide_", "copy_", "mul", "div", "true_divide"})


def _grad_expr(e: ast.AST) -> bool:
    """``p.grad`` or ``p.grad.data``."""
    if isinstance(e, ast.Attribute) and e.attr == "data":
        e = e.value
    return isinstance(e, ast.Attribute) and e.attr == "grad"


def _grad_items(it: ast.AST, fn: ast.AST) -> bool:
    """``it`` (a loop's iterable) holds gradients: a comprehension of ``p.grad``/``p.grad.data``,
    or a name bound once in ``fn`` to one."""
    if isinstance(it, ast.Name):
        binds = [n for n in walk(fn) if isinstance(n, ast.Assign) and len(n.targets) == 1
                 and isinstance(n.targets[0], ast.Name) and n.targets[0].id == it.id]
        stores = [n for n in walk(fn) if isinstance(n, ast.Name) and n.id == it.id
                  and isinstance(n.ctx, ast.Store)]
        if len(binds) != 1 or len(stores) != 1:
            return False
        it = binds[0].value
    return isinstance(it, (ast.ListComp, ast.GeneratorExp)) and _grad_expr(it.elt)


def _gradient(arg: ast.AST, ctx: Context, fn: ast.AST) -> bool:
    """The all-reduced tensor is each parameter's gradient in turn: ``p.grad(.data)`` with ``p``
    the target of an enclosing loop, or the target of an enclosing loop over such gradients
    (``for g in grads: dist.all_reduce(g)``). One gradient reduced alone (a tensor-parallel
    hook summing a replicated parameter's partial gradients) is another matter."""
    if _grad_expr(arg):
        owner = arg.value.value if isinstance(arg.value, ast.Attribute) \
            and arg.attr == "data" else arg.value  # type: ignore[attr-defined]
        return isinstance(owner, ast.Name) and any(  # every parameter, in a loop
            isinstance(lp, (ast.For, ast.AsyncFor)) and isinstance(lp.target, ast.Name)
            and lp.target.id == owner.id for lp in ctx.loops)
    return isinstance(arg, ast.Name) and any(
        isinstance(lp, (ast.For, ast.AsyncFor)) and isinstance(lp.target, ast.Name)
        and lp.target.id == arg.id and _grad_items(lp.iter, fn) for lp in ctx.loops)


def _summed(call: ast.Call, ctx: Context) -> bool:
    """No ``op`` (the default ``ReduceOp.SUM``), or ``op=ReduceOp.SUM`` written out."""
    ops = [k.value for k in call.keywords if k.arg == "op"] + call.args[1:2]
    if any(k.arg in (None, "group") for k in call.keywords) or len(call.args) > 2:
        return False  # a process group: a model-parallel mesh whose partial sums are meant
    return not ops or (ctx.qualified_name(ops[0]) or "").endswith("ReduceOp.SUM")


def _rescales(fn: ast.AST, ctx: Context) -> bool:
    """``fn`` divides or multiplies something in place or by an operator (``g /= n``,
    ``p.grad.div_(n)``, ``g * (1 / n)``, ``lr * world_size``): the sum may be made a mean
    there, or compensated; only a function that reduces and never rescales is judged."""
    for n in walk(fn):
        if isinstance(n, ast.AugAssign) and isinstance(n.op, (ast.Div, ast.Mult, ast.FloorDiv)):
            return True
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Div, ast.Mult)):
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr in SCALES:
            return True
        if isinstance(n, ast.Call) and ctx.qualified_name(n.func) in WORLD:
            return True
    return False


def _world_divides_other(ctx: Context) -> bool:
    """Some function of the file divides (or multiplies) by the world size a value it does not
    all-reduce itself (``loss = loss / dist.get_world_size()`` before backward, a learning rate
    scaled by it): the summed gradient may be meant. A division of the reduced buffer itself
    (``dist.all_reduce(buf); buf /= dist.get_world_size()``) compensates nothing elsewhere."""
    tree = ctx.tree
    for fn in [tree, *(f for f in walk(tree) if isinstance(f, FUNCTION_TYPES))]:
        own = [n for n in walk(fn) if not (isinstance(n, FUNCTION_TYPES) and n is not fn)]
        world = {t.id for n in own if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
                 and ctx.qualified_name(n.value.func) in WORLD
                 for t in n.targets if isinstance(t, ast.Name)}
        reduced = {ctx.source(c.args[0]) for c in own if isinstance(c, ast.Call) and c.args
                   and ctx.qualified_name(c.func) == REDUCE}

        def is_world(e: ast.AST) -> bool:
            return isinstance(e, ast.Call) and ctx.qualified_name(e.func) in WORLD or \
                isinstance(e, ast.Name) and e.id in world
        for n in own:
            if isinstance(n, ast.AugAssign) and isinstance(n.op, (ast.Div, ast.Mult)) \
                    and is_world(n.value) and ctx.source(n.target) not in reduced:
                return True
            if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Div, ast.Mult)) \
                    and (is_world(n.right) or is_world(n.left)):
                return True
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr in SCALES and any(is_world(a) for a in n.args) \
                    and ctx.source(n.func.value) not in reduced:
                return True
    return False


class GradientsSummedOverRanks(Rule):
    """The parameters' gradients are all-reduced by hand with `dist.all_reduce(g)` (the
    default `op` is `ReduceOp.SUM`) and never divided by the world size: every rank steps
    with the sum of the ranks' gradients, `world_size` times their mean.

    Why: `torch.distributed.all_reduce` sums by default; `DistributedDataParallel` divides by
    the world size itself, a hand-written reduction must do it too (`g.div_(world_size)`
    before or after, or `op=ReduceOp.AVG` on NCCL). Without it the effective learning rate
    grows with the number of processes and nothing fails (mmdetection's `reduce_grads` with
    `coalesce=False`; checked on torch 2.13 with two gloo processes: the reduced gradient is
    2.00x the gradient of the global mean loss).
    Known limits: the reduced tensor must be each parameter's gradient in a loop (`p.grad`,
    `p.grad.data` with `p` the loop's target, or a loop over a comprehension of them), over
    the default group (a `group=` is a model-parallel mesh, whose partial gradients are summed
    on purpose); the function that reduces must scale nothing
    (no `/`, `*`, `div_`, `mul_`, `copy_`, no `get_world_size()`), no function of the file
    may scale anything else by the world size (a loss divided by it before backward), and no
    `DistributedDataParallel` is built.
    """

    code = "GT472"
    name = "gradients-summed-over-ranks"
    message = ("`{call}` sums `{grad}` over the ranks (the default op is `ReduceOp.SUM`) and "
               "nothing divides it by the world size: each rank steps with `world_size` times "
               "the mean gradient; divide it (`{grad}.div_(dist.get_world_size())`) or reduce "
               "with `op=ReduceOp.AVG`")
    triggers = ("all_reduce",)
    gate_statements = True
    examples = [
        Bad("""
            import torch.distributed as dist

            def reduce_grads(model):
                grads = [p.grad.data for p in model.parameters() if p.grad is not None]
                for g in grads:
                    dist.all_reduce(g)
            """, at=(6, 8)),
        Bad("""
            import torch.distributed as dist

            def sync(model):
                for p in model.parameters():
                    dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            """, at=(5, 8)),
        Good("""
            import torch.distributed as dist

            def reduce_grads(model):
                grads = [p.grad.data for p in model.parameters() if p.grad is not None]
                for g in grads:
                    dist.all_reduce(g)
                    g /= dist.get_world_size()
            """),
        Good("""
            import torch.distributed as dist

            def sync(model):
                for p in model.parameters():
                    dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)

            def train(model, x, y, opt):
                loss = ((model(x) - y) ** 2).mean()
                loss.backward()
                sync(model)
                opt.step()
            """),
        Good("""
            import torch.distributed as dist

            def sync(model):
                for p in model.parameters():
                    dist.all_reduce(p.grad)

            def train(model, x, y, opt):
                loss = ((model(x) - y) ** 2).mean() / dist.get_world_size()
                loss.backward()
                sync(model)
                opt.step()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if not node.args or ctx.qualified_name(node.func) != REDUCE or ctx.function is None:
            return
        fn = ctx.function
        if not _summed(node, ctx) or not _gradient(node.args[0], ctx, fn) \
                or _rescales(fn, ctx) or wraps(ctx) or _world_divides_other(ctx):
            return
        stmt = ctx.statement
        if not isinstance(stmt, ast.Expr) or stmt.value is not node:
            return
        yield self.report(stmt, ctx, call=ctx.source(node)[:60],
                          grad=ctx.source(node.args[0])[:40])
