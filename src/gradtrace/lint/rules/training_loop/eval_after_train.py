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


# NOTE [trained and evaluated in one mode]
# `Module.train()`/`eval()` only flip `training`; a module is built in train mode. When no
# statement of a function (or script), nor a call of a function of the file it makes, switches
# a model's mode (nor an owner's or a part's), a training loop of the model followed in the
# same block by a loop running it under `no_grad` evaluates it in the mode it trained in: train
# mode, unless the training itself ran in eval mode (GT516's bug). BatchNorm recalibration
# (`update_bn`) runs under `no_grad` in train mode on purpose, after an explicit `train()`:
# that path asks whether the block switched the mode, as before.
def _eval_loop(t: ast.stmt, model: str, ctx: Context) -> tuple[ast.stmt, ast.Call] | None:
    """The loop of ``t`` that runs ``model`` under ``no_grad`` and the call: ``t`` itself (a
    loop, or a ``with`` holding one), or a loop inside an ``if`` (``if args.validate:``), the
    loop a finding names."""
    if isinstance(t, LOOPS) or isinstance(t, WITHS) and any(isinstance(x, LOOPS) for x in walk(t)):
        call = _runs_without_grad(t, model, ctx)
        return (t, call) if call is not None else None
    if isinstance(t, ast.If):
        for x in walk(t):
            if isinstance(x, LOOPS) and (call := _runs_without_grad(x, model, ctx)) is not None:
                return x, call
    return None


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
    """A block calls `model.train()` (or never switches the model's mode at all), runs a
    training loop, then runs the model under `torch.no_grad()` in a second loop that makes no
    backward pass, with no `model.eval()` between.

    Why: `train()` was set for the training loop and nothing switches it off: the evaluation
    loop runs with dropout dropping and batch norm normalising each evaluation batch with its
    own statistics, and folding them into the running averages the model keeps
    (deepspeech.pytorch's validation loop, fixed by "test in eval mode"; checked on torch
    2.13). `no_grad` only stops recording the graph. Call `model.eval()` before the
    evaluation loop (and `model.train()` again before the next epoch's training).
    A model that nothing in the function (or script) ever puts in a mode is evaluated in the
    mode it was trained in: a new module is in train mode, and a training loop run in eval
    mode would be GT516's bug (NOTE [trained and evaluated in one mode]). The evaluation loop
    may sit under an `if` (`if args.validate:`) of that block.
    Known limits: the `train()` call (when there is one), the training loop and the evaluation
    loop (or the `if` holding it) must be statements of one block (a function's or a script's
    body, an epoch loop's body), the model a name or attribute whose class or constructor
    shows dropout or batch norm, run in the training loop too when there is no `train()`; an
    `eval()` anywhere in the evaluation loop, or in a call of a function of the file before
    it, counts as switching modes, and without a `train()` so does any switch of the model
    anywhere in the function (or script).
    """

    code = "GT550"
    name = "evaluation-loop-after-train-mode"
    message = ("`{model}` {how}; this loop runs it "
               "under `{mode}` without `.eval()`: dropout and batch norm act as in training "
               "and the running statistics move toward the evaluation data")
    gate_statements = "function"
    triggers = (".train(", "no_grad", "inference_mode", "set_grad_enabled")
    function_needs = ("backward",)

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
        Bad("""
            import torch
            import torch.nn as nn
            net = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            for epoch in range(3):
                for x, y in train_data:
                    opt.zero_grad()
                    nn.functional.cross_entropy(net(x), y).backward()
                    opt.step()
                if validate:
                    for x, y in val_data:
                        with torch.no_grad():
                            acc = (net(x).argmax(1) == y).float().mean()
            """, at=(11, 8)),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        if not f.backwards:
            return
        switched = False
        for s in f.scope.stmts:
            if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
                    and mode_call(s.value) == "train"):
                continue
            switched = True
            model = dotted(s.value.func.value)  # type: ignore[attr-defined]
            path = f.paths.get(id(s))
            if not model or not path:
                continue
            pid, field, idx = path[-1]
            got = self._after(f, ctx, s, model, f.blocks[(pid, field)][idx + 1:])
            if got is not None:
                yield got
        if not switched:
            yield from self._never_switched(f, ctx)

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
            got = _eval_loop(t, model, ctx)
            if got is None:
                continue
            k = ctx.analysis.kind(s.value.func.value, f.scope, s.lineno)  # type: ignore
            if k is None or not _kind_has_mode_layers(ctx, k):
                return None
            return self._report(got, ctx, related_at(ctx, s.value, "train mode is set here"),
                                model, f"was put in train mode at line {s.lineno} and trained")
        return None

    def _report(self, got: tuple[ast.stmt, ast.Call], ctx: Context, anchor: object,
                model: str, how: str) -> Finding:
        loop, call = got
        mode = next(ctx.source(i.context_expr) for w in walk(loop) if isinstance(w, WITHS)
                    for i in w.items if disables_grad(i.context_expr, ctx))
        return self.report(loop, ctx, related=(
            anchor, related_at(ctx, call, "the model runs here")),
            model=model, how=how, mode=mode)

    def _never_switched(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        """NOTE [trained and evaluated in one mode]: a block runs a training loop, then an
        evaluation loop of the same model under ``no_grad``, and nothing in the function (or
        script) ever switches that model's mode."""
        for block in f.blocks.values():
            trained: ast.stmt | None = None
            for t in block:
                if isinstance(t, (ast.Return, ast.Raise, ast.Break, ast.Continue)):
                    break
                if _trains(f, t):
                    trained = t if isinstance(t, LOOPS) else None
                    continue
                if trained is None or not _no_grad_loop(t, ctx):
                    continue
                for model in _models_run(trained):
                    got = _eval_loop(t, model, ctx)
                    if got is None or _trains(f, got[0]) or self._switched(f, ctx, model):
                        continue
                    fn = got[1].func
                    k = ctx.analysis.kind(fn.value if isinstance(fn, ast.Attribute) and
                                          fn.attr == "forward" else fn, f.scope, got[1].lineno)
                    if k is None or not _kind_has_mode_layers(ctx, k):
                        continue
                    yield self._report(got, ctx, related_at(ctx, trained, "trained here"),
                                       model, f"is trained at line {trained.lineno} and never "
                                       "put in eval mode")
                    return

    @staticmethod
    def _switched(f: LoopFacts, ctx: Context, model: str) -> bool:
        """Whether a statement of the function (or script) switches ``model``'s mode, or an
        owner's or a part's, itself or through a call of a function of the file."""
        memo: dict[str, bool] = ctx.memo("gt550-switched", f.node, dict)
        if model not in memo:
            memo[model] = any(_modes(f, ctx, s, model) for s in getattr(f.node, "body", ())
                              if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                    ast.ClassDef)))
        return memo[model]


def _no_grad_loop(t: ast.stmt, ctx: Context) -> bool:
    """``t`` holds a loop and a ``no_grad``/``inference_mode`` block (a cheap first look)."""
    return isinstance(t, (*LOOPS, *WITHS, ast.If)) and any(
        isinstance(x, LOOPS) for x in walk(t)) and any(
        isinstance(w, WITHS) and any(disables_grad(i.context_expr, ctx) for i in w.items)
        for w in walk(t))


def _models_run(loop: ast.stmt) -> list[str]:
    """The names called in ``loop`` (``model(x)``, ``model.forward(x)``), in order."""
    out: list[str] = []
    for n in walk(loop):
        if isinstance(n, ast.Call):
            f = n.func
            name = dotted(f.value) if isinstance(f, ast.Attribute) and f.attr == "forward" \
                else dotted(f)
            if name and name not in out:
                out.append(name)
    return out
