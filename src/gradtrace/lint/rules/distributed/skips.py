"""GT455: a training step that one rank can skip while the others all-reduce."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.distributed._ddp import wraps


def _caught(h: ast.ExceptHandler) -> set[str]:
    t = h.type
    elts = t.elts if isinstance(t, ast.Tuple) else [t] if t is not None else []
    return {n.rpartition(".")[2] for n in (dotted(e) for e in elts) if n}


def _method(call: ast.Call, ctx: Context) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The function of this file that ``call`` runs (``helper(...)``, ``self.m(...)``, or
    ``obj.m(...)`` where the analysis knows ``obj``'s class)."""
    an = ctx.analysis
    fn = an.callee(call, ctx.function)
    if fn is not None or not isinstance(call.func, ast.Attribute):
        return fn
    k = an.kind(call.func.value)
    cls = an.classes.get(k.cls) if k is not None and k.cls else None
    return cls.methods.get(call.func.attr) if cls is not None else None


def _raise_before_backward(fn: ast.AST, names: set[str]) -> tuple[ast.Raise, ast.Call] | None:
    """(a conditional ``raise X`` of one of ``names``, the later ``backward()``) in ``fn``."""
    raises: list[ast.Raise] = []
    for s in walk(fn):
        if isinstance(s, ast.If):
            for r in walk(s):
                exc = r.exc if isinstance(r, ast.Raise) else None
                exc = exc.func if isinstance(exc, ast.Call) else exc
                if exc is not None and (dotted(exc) or "").rpartition(".")[2] in names:
                    raises.append(r)  # type: ignore[arg-type]
    for r in raises:
        for c in walk(fn):
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) \
                    and c.func.attr == "backward" and c.lineno > r.lineno:
                return r, c
    return None


class RankSkipsDdpStep(Rule):
    """A training step that raises on some ranks' data is skipped with `continue` while the
    other ranks of `DistributedDataParallel` run its backward.

    Why: DDP's backward all-reduces the gradients of every rank, so every rank must run the
    same number of backward passes. When the step raises on one rank only (its batch has no
    valid anchors, no boxes...) and the loop `continue`s, the other ranks wait in the
    all-reduce for a rank that has moved on: the job hangs or fails with a collective error
    ('Connection closed by peer', a gloo/NCCL timeout). Decide the skip on every rank
    (all-reduce a flag, skip when any rank must), or run the backward of a zero loss instead.
    Known limits: only a step of this file (a function or a method of a known object) that
    raises the caught exception under an `if` before its `backward()`, called in a `try`
    whose handler `continue`s, in a file that builds `DistributedDataParallel`.
    """

    code = "GT455"
    name = "rank-skips-ddp-step"
    message = ("when `{step}` raises `{exc}` (line {raise_line}) this rank `continue`s past its "
               "`backward()` (line {bwd_line}) while the other ranks of DistributedDataParallel "
               "(line {line}) run theirs: their all-reduce waits for this rank and the job hangs "
               "or fails; decide the skip on every rank (all-reduce a flag)")
    triggers = ("continue",)
    gate_statements = True
    examples = [
        Bad("""
            from torch.nn.parallel import DistributedDataParallel as DDP
            class NoAnchors(Exception):
                pass
            class Trainer:
                def __init__(self, model, opt):
                    self.model, self.opt = DDP(model), opt
                def step(self, batch):
                    if batch.size(1) < 4:
                        raise NoAnchors()
                    self.model(batch).mean().backward()
                    self.opt.step()
            def run(model, opt, batches):
                trainer = Trainer(model, opt)
                for batch in batches:
                    try:
                        trainer.step(batch)
                    except NoAnchors:
                        continue
            """, at=(18, 12)),
        Good("""
            import torch.distributed as dist
            from torch.nn.parallel import DistributedDataParallel as DDP
            class NoAnchors(Exception):
                pass
            def step(model, batch):
                flag = torch.tensor(float(batch.size(1) < 4))
                dist.all_reduce(flag)
                if flag.item() > 0:
                    raise NoAnchors()
                model(batch).mean().backward()
            def run(model, batches):
                model = DDP(model)
                for batch in batches:
                    try:
                        batch = batch.float()
                    except ValueError:
                        continue
                    step(model, batch)
            """),
    ]

    def visit_Try(self, node: ast.Try, ctx: Context) -> Iterator[Finding]:
        if not ctx.loops or not ctx.mentions("DistributedDataParallel"):
            return
        ws = wraps(ctx)
        if not ws:
            return
        for h in node.handlers:
            cont = next((s for s in h.body if isinstance(s, ast.Continue)), None)
            names = _caught(h)
            if cont is None or not names:
                continue
            for c in (n for s in node.body for n in walk(s) if isinstance(n, ast.Call)):
                fn = _method(c, ctx)
                got = _raise_before_backward(fn, names) if fn is not None else None
                if got is None or self._collective(fn):
                    continue
                r, bwd = got
                exc = r.exc.func if isinstance(r.exc, ast.Call) else r.exc
                yield self.report(cont, ctx, related=(Related(
                    ctx.path, r.lineno, "raised here on this rank's data", ctx.column(r)),),
                    step=ctx.source(c.func), exc=ctx.source(exc), raise_line=r.lineno,  # type: ignore[arg-type]
                    bwd_line=bwd.lineno, line=ws[0].line)
                return

    visit_TryStar = visit_Try  # type: ignore[assignment]

    @staticmethod
    def _collective(fn: ast.AST) -> bool:
        """The step agrees with the other ranks before raising (an ``all_reduce``/``barrier``
        call of its own)."""
        return any(isinstance(n, ast.Call) and isinstance(n.func, (ast.Attribute, ast.Name))
                   and (dotted(n.func) or "").rpartition(".")[2] in (
                       "all_reduce", "all_gather", "broadcast", "barrier", "all_gather_object")
                   for n in walk(fn))
