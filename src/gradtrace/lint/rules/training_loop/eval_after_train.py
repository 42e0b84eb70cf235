"""GT550: a block puts a model in train mode, trains it, then evaluates it in a loop without
`.eval()`."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.reach import disables_grad
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.rules.training_loop._base import LoopRule, related_at
from gradtrace.lint.rules.training_loop._loop import LoopFacts
from gradtrace.lint.rules.training_loop._modes import covers, effects, mode_call
from gradtrace.lint.rules.training_loop.modes import _kind_has_mode_layers

LOOPS = (ast.For, ast.AsyncFor, ast.While)
WITHS = (ast.With, ast.AsyncWith)


def _modes(f: LoopFacts, ctx: Context, stmt: ast.stmt, model: str) -> set[str]:
    """The modes the calls of ``stmt`` put ``model`` (or an owner of it) in."""
    out: set[str] = set()
    for n in walk(stmt):
        if isinstance(n, ast.Call):
            for r, ms in effects(ctx, f.node, n).items():
                if r and (covers(r, model) or covers(model, r)):
                    out |= ms
    return out


def _trains(f: LoopFacts, stmt: ast.stmt) -> bool:
    return any(f.inside(b.stmt, stmt) for b in f.backwards) \
        or any(f.inside(s.stmt, stmt) for s in f.steps)


def _runs_without_grad(stmt: ast.stmt, model: str, ctx: Context) -> ast.Call | None:
    """A call of ``model`` (``model(x)``, ``model.forward(x)``) inside a ``no_grad`` /
    ``inference_mode`` block of ``stmt``."""
    for w in walk(stmt):
        if isinstance(w, WITHS) and any(disables_grad(i.context_expr, ctx) for i in w.items):
            for n in walk(w):
                if isinstance(n, ast.Call) and (dotted(n.func) == model or isinstance(
                        n.func, ast.Attribute) and n.func.attr == "forward"
                        and dotted(n.func.value) == model):
                    return n
    return None


class EvaluationLoopAfterTrainMode(LoopRule):
    """A block calls `model.train()`, runs a training loop, then runs the model under
    `torch.no_grad()` in a second loop that makes no backward pass, with no `model.eval()`
    between.

    Why: `train()` was set for the training loop and nothing switches it off: the evaluation
    loop runs with dropout dropping and batch norm normalising each evaluation batch with its
    own statistics, and folding them into the running averages the model keeps
    (deepspeech.pytorch's validation loop, fixed by "test in eval mode"; checked on torch
    2.13). `no_grad` only stops recording the graph. Call `model.eval()` before the
    evaluation loop (and `model.train()` again before the next epoch's training).
    Known limits: the `train()` call, the training loop and the evaluation loop must be
    statements of one block (a function's or a script's body, an epoch loop's body), the model
    a name or attribute whose class or constructor shows dropout or batch norm; an `eval()`
    anywhere in the evaluation loop, or in a call of a function of the file before it, counts
    as switching modes.
    """

    code = "GT550"
    name = "evaluation-loop-after-train-mode"
    message = ("`{model}` was put in train mode at line {line} and trained; this loop runs it "
               "under `{mode}` without `.eval()`: dropout and batch norm act as in training "
               "and the running statistics move toward the evaluation data")
    gate_statements = "function"
    triggers = (".train(",)
    function_needs = ("backward", ".train(")

    def wants(self, text: str) -> bool:
        return super().wants(text) and any(
            w in text for w in ("no_grad", "inference_mode", "set_grad_enabled"))
    examples = [
        Bad("""
            import torch
            import torch.nn as nn
            net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            for epoch in range(3):
                net.train()
                for x, y in train_data:
                    opt.zero_grad()
                    nn.functional.cross_entropy(net(x), y).backward()
                    opt.step()
                for x, y in val_data:
                    with torch.no_grad():
                        acc = (net(x).argmax(1) == y).float().mean()
            """, at=(11, 4)),
        Good("""
            import torch
            import torch.nn as nn
            net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            for epoch in range(3):
                net.train()
                for x, y in train_data:
                    opt.zero_grad()
                    nn.functional.cross_entropy(net(x), y).backward()
                    opt.step()
                net.eval()
                for x, y in val_data:
                    with torch.no_grad():
                        acc = (net(x).argmax(1) == y).float().mean()
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        if not f.backwards:
            return
        for s in f.scope.stmts:
            if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
                    and mode_call(s.value) == "train"):
                continue
            model = dotted(s.value.func.value)  # type: ignore[attr-defined]
            path = f.paths.get(id(s))
            if not model or not path:
                continue
            pid, field, idx = path[-1]
            got = self._after(f, ctx, s, model, f.blocks[(pid, field)][idx + 1:])
            if got is not None:
                yield got

    def _after(self, f: LoopFacts, ctx: Context, s: ast.Expr, model: str,
               rest: list[ast.stmt]) -> Finding | None:
        trained = False
        for t in rest:
            if isinstance(t, (ast.Return, ast.Raise, ast.Break, ast.Continue)):
                return None
            if _modes(f, ctx, t, model):
                return None  # switched (or set again) here
            if _trains(f, t):
                trained = True
                continue
            if not trained:
                continue
            if not (isinstance(t, LOOPS) or isinstance(t, WITHS) and any(
                    isinstance(x, LOOPS) for x in walk(t))):
                continue
            call = _runs_without_grad(t, model, ctx)
            if call is None:
                continue
            k = ctx.analysis.kind(s.value.func.value, f.scope, s.lineno)  # type: ignore
            if k is None or not _kind_has_mode_layers(ctx, k):
                return None
            mode = next(ctx.source(i.context_expr) for w in walk(t) if isinstance(w, WITHS)
                        for i in w.items if disables_grad(i.context_expr, ctx))
            return self.report(t, ctx, related=(
                related_at(ctx, s.value, "train mode is set here"),
                related_at(ctx, call, "the model runs here")),
                model=model, line=s.lineno, mode=mode)
        return None
