"""GT453-GT454: gradients that DistributedDataParallel does not average as the code means."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.exclusive_arms import apart
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import statements, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.distributed._ddp import (
    TRIGGERS, Wrap, held_wrapper, unwrapped, wraps)

ALL_REDUCE = frozenset({"torch.distributed.all_reduce", "torch.distributed.all_reduce_coalesced"})


CUTS = frozenset({"detach", "item", "tolist", "numpy", "detach_"})


def _names(e: ast.AST) -> set[str]:
    return {n.id for n in walk(e) if isinstance(n, ast.Name)}


def _cut(e: ast.AST) -> set[int]:
    """ids of the nodes of ``e`` whose value leaves the graph (under ``x.detach()``,
    ``x.item()``...)."""
    out: set[int] = set()
    for n in walk(e):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr in CUTS:
            out.update(id(x) for x in walk(n.func.value))
    return out


def _live_names(e: ast.AST) -> set[str]:
    """Names read in ``e`` whose value may stay on the graph."""
    cut = _cut(e)
    return {n.id for n in walk(e) if isinstance(n, ast.Name) and id(n) not in cut}


def _reaches_backward(fn: ast.AST, start: ast.stmt, seeds: set[str]) -> ast.Call | None:
    """The ``backward()`` call of ``fn`` whose tensor is made (through assignments after
    ``start``, in source order) from the names ``seeds``, if any."""
    tainted = set(seeds)
    after = False
    for s in statements(fn):
        if s is start:
            after = True
            continue
        if not after:
            continue
        for n in walk(s):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr == "backward" and _names(n.func.value) & tainted:
                return n
        if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and s.value is not None \
                and _live_names(s.value) & tainted:
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            for t in targets:
                tainted |= {n.id for n in walk(t) if isinstance(n, ast.Name)}
    return None


def _manual_grad_sync(ctx: Context) -> bool:
    """The file all-reduces gradients itself (``dist.all_reduce(p.grad)``)."""
    def make() -> bool:
        for n in walk(ctx.tree):
            if isinstance(n, ast.Call) and (ctx.qualified_name(n.func) or "") in ALL_REDUCE \
                    and any(isinstance(x, ast.Attribute) and x.attr == "grad"
                            for a in n.args for x in walk(a)):
                return True
        return False
    return ctx.memo("gt45-manual-sync", ctx.tree, make)


class ForwardBypassesDdp(Rule):
    """The training forward runs through `ddp_model.module`, so backward never all-reduces the
    gradients.

    Why: `DistributedDataParallel` averages gradients across ranks from hooks that its own
    `forward` arms. Calling the wrapped module directly (`model.module(x)`, or a name bound
    to it: `unwrapped = model.module if isinstance(model, DDP) else model`) runs the same
    layers without the wrapper: the loss's `backward()` fills each rank's own gradients and
    no all-reduce happens (verified on torch 2.13: a communication hook is never called),
    so the replicas drift apart, silently. Call the wrapper itself (`model(x)`) for every
    forward whose loss is backpropagated.
    Known limits: only a wrapper bound to a name in the same function (or a parameter that a
    call of the file passes one, or `self.<attr>` that a class's only assignment binds to such
    a parameter: `Trainer(ddp_model)`), whose `.module` result reaches a `backward()` in that
    function through assignments; a file that all-reduces `.grad` itself is left alone; an
    alias bound only under a test its backward's arm contradicts (`if not train: fm =
    model.module` ... `if train: loss.backward()`) is left alone (NOTE [arms of one flag]).
    """

    code = "GT453"
    name = "forward-bypasses-ddp"
    message = ("`{callee}` runs the forward through the module inside DistributedDataParallel "
               "(line {line}), not through the wrapper: the `backward()` on line {bwd} "
               "all-reduces nothing, so every rank steps with its own gradients and the replicas "
               "drift apart; call the wrapper instead")
    triggers = (".module",)
    gate_statements = False  # the bypass may sit in a function that never spells `.module`
    # (`unwrap(model)(x)`, `self._get_model().compute_loss(b)`)
    examples = [
        Bad("""
            from torch.nn.parallel import DistributedDataParallel
            def train(policy, batches, opt):
                model = DistributedDataParallel(policy)
                unwrapped = model.module if isinstance(model, DistributedDataParallel) else model
                for x, adv in batches:
                    logp = unwrapped(x).log_softmax(-1)[:, 0]
                    loss = -(logp * adv).mean()
                    loss.backward()
                    opt.step()
            """, at=(6, 15)),
        Bad("""
            from torch.nn.parallel import DistributedDataParallel as DDP
            def step(model, x, y):
                out = model.module(x)
                ((out - y) ** 2).mean().backward()
            def main(net, x, y):
                model = DDP(net)
                step(model, x, y)
            """, at=(3, 10)),
        Good("""
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP
            def main(net, x, y, prompts):
                model = DDP(net)
                with torch.no_grad():
                    samples = model.module.generate(prompts)
                ref = model.module(x).detach()
                loss = ((model(x) - ref) ** 2).mean()
                loss.backward()
                w = model.module.weight
            """),
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        if not ctx.mentions(*TRIGGERS) or not ctx.mentions(".backward(") \
                or _manual_grad_sync(ctx):
            return
        scope = ctx.scope(node)
        for s in statements(node):
            for n in walk(s) if isinstance(s, (ast.Assign, ast.Expr, ast.AugAssign)) else ():
                if not isinstance(n, ast.Call):
                    continue
                w = self._bypassed(n, node, ctx)
                if w is None or scope.grad_off_at(n) is not None:
                    continue
                st = scope.statement_of(n) or s
                if id(n) in _cut(st):
                    continue  # `ref = model.module(x).detach()`
                seeds = {t.id for t in walk(st.targets[0]) if isinstance(t, ast.Name)} \
                    if isinstance(st, ast.Assign) else set()
                bwd = self._backward_of(n, st, node, seeds)
                alias = scope.binding_before(n.func.id, n.lineno) \
                    if isinstance(n.func, ast.Name) else None
                if bwd is None or alias is not None and apart(alias.stmt, bwd, node, ctx):
                    continue  # NOTE [arms of one flag]: the alias is made where none runs
                yield self.report(n, ctx, related=(Related(
                    ctx.path, w.line, "the model is wrapped here", ctx.column(w.call)),),
                    callee=ctx.source(n.func), line=w.line, bwd=bwd.lineno)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    @staticmethod
    def _backward_of(call: ast.Call, st: ast.stmt, fn: ast.AST, seeds: set[str]
                     ) -> ast.Call | None:
        for n in walk(st):  # `model.module(x).sum().backward()` in one statement
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr == "backward" and any(x is call for x in walk(n.func.value)):
                return n
        return _reaches_backward(fn, st, seeds) if seeds else None

    @staticmethod
    def _bypassed(call: ast.Call, fn: ast.AST, ctx: Context) -> Wrap | None:
        """The wrap whose inner module ``call`` runs: called itself (its ``forward``), or a
        method of it (``inner.compute_loss(batch)``, which runs ``self(x)``) in a function that
        never calls a wrapper; the inner module read through ``.module``, a local alias, a
        helper or a property that returns it (:func:`unwrapped`)."""
        f = call.func
        w = unwrapped(f, fn, call.lineno, ctx)
        if w is not None:
            return w
        if isinstance(f, ast.Attribute) and f.attr not in ("forward", "__call__") \
                and not _calls_wrapper(fn, ctx):
            return unwrapped(f.value, fn, call.lineno, ctx)
        return unwrapped(f.value, fn, call.lineno, ctx) \
            if isinstance(f, ast.Attribute) and f.attr == "forward" else None


def _calls_wrapper(fn: ast.AST, ctx: Context) -> bool:
    """``fn`` calls a DDP wrapper itself (``model(x)``, ``self.model(x)``): DDP's reducer is
    armed, and the gradients of a method of the inner module in the same backward are
    averaged with the rest."""
    return any(isinstance(n, ast.Call) and held_wrapper(  # `model.forward(x)` runs DDP's too
        n.func.value if isinstance(n.func, ast.Attribute) and n.func.attr == "forward"
        else n.func, fn, n.lineno, ctx) is not None for n in walk(fn))


def _sum_reduce(call: ast.Call, ctx: Context) -> bool:
    """An ``all_reduce`` that sums (the default op)."""
    op = call.args[1] if len(call.args) > 1 else next(
        (k.value for k in call.keywords if k.arg == "op"), None)
    return op is None or (dotted(op) or "").endswith("SUM")


class LossNormalisedTwiceUnderDdp(Rule):
    """A loss divided by a count summed over all ranks is backpropagated through
    `DistributedDataParallel`, which averages over the ranks again.

    Why: DDP divides the all-reduced gradient by the world size. Dividing each rank's summed
    loss by the *global* token count (`dist.all_reduce(n_tokens)`; `loss = loss_sum /
    n_tokens`) already gives the global mean, so the synchronised gradient ends up
    `1 / world_size` of it: a learning rate silently scaled by the number of GPUs, and
    gradient clipping thresholds that mean something else on every cluster size (verified on
    torch 2.13 with two ranks). Multiply the loss by `dist.get_world_size()`, or divide by the
    local count.
    Known limits: only a count all-reduced with the default (sum) op in the same function as
    the division and the `backward()`, in a file that wraps a model in
    `DistributedDataParallel`; a function that mentions the world size is trusted to
    compensate.
    """

    code = "GT454"
    name = "loss-normalised-twice-under-ddp"
    message = ("`{loss}` is divided by `{count}`, a count summed over all ranks (line {line}), "
               "and DistributedDataParallel averages the gradients over the ranks again: the "
               "synchronised gradient is 1/world_size of the global mean; multiply by "
               "`dist.get_world_size()` or divide by the local count")
    triggers = ("all_reduce",)
    gate_statements = "function"
    examples = [
        Bad("""
            import torch.distributed as dist
            import torch.nn.functional as F
            from torch.nn.parallel import DistributedDataParallel as DDP
            def train_step(model, x, labels):
                loss_sum = F.cross_entropy(model(x), labels, reduction="sum")
                n = torch.tensor(float(labels.numel()))
                dist.all_reduce(n)
                loss = loss_sum / n
                loss.backward()
            model = DDP(net)
            """, at=(8, 4)),
        Good("""
            import torch.distributed as dist
            import torch.nn.functional as F
            from torch.nn.parallel import DistributedDataParallel as DDP
            def train_step(model, x, labels):
                loss_sum = F.cross_entropy(model(x), labels, reduction="sum")
                n = torch.tensor(float(labels.numel()))
                dist.all_reduce(n)
                loss = loss_sum / n * dist.get_world_size()
                loss.backward()
                m = n.clone()
                dist.all_reduce(m, op=dist.ReduceOp.MAX)
                (loss_sum / m).backward()
            model = DDP(net)
            """),
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        if not ctx.mentions(*TRIGGERS) or not wraps(ctx):
            return
        code = "\n".join(ctx.code_lines[node.lineno - 1:node.end_lineno])
        if "world_size" in code:
            return
        counts: dict[str, ast.stmt] = {}
        for s in statements(node):
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) \
                    and (ctx.qualified_name(s.value.func) or "") in ALL_REDUCE \
                    and s.value.args and isinstance(s.value.args[0], ast.Name) \
                    and _sum_reduce(s.value, ctx):
                counts[s.value.args[0].id] = s
                continue
            if not counts or not isinstance(s, ast.Assign) or len(s.targets) != 1 \
                    or not isinstance(s.value, ast.BinOp) or not isinstance(s.value.op, ast.Div):
                continue
            hit = [c for c in _names(s.value.right) if c in counts]
            target = dotted(s.targets[0])
            if not hit or target is None or "." in target:
                continue
            if _reaches_backward(node, s, {target}) is None:
                continue
            red = counts[hit[0]]
            yield self.report(s, ctx, related=(Related(
                ctx.path, red.lineno, f"`{hit[0]}` is summed over the ranks here",
                ctx.column(red)),), loss=target, count=ctx.source(s.value.right),
                line=red.lineno)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]
