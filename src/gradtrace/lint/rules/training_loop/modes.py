"""GT516: an evaluation inside the training loop leaves the model in eval mode."""
from __future__ import annotations

import ast
import re
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.kinds import MODULE, Kind
from gradtrace.lint.analysis.vocabulary import MODEL_FACTORIES
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.rules.training_loop._loop import LoopFacts, calls_in, facts
from gradtrace.lint.rules.training_loop._base import LoopRule, related_at

# layers that behave differently in train and eval mode
MODE_LAYERS_RE = re.compile(r"\b(Dropout\w*|BatchNorm\w*|SyncBatchNorm|InstanceNorm\w*|"
                            r"AlphaDropout|dropout\w*)\b|self\.training\b")


def _mode_call(call: ast.Call) -> str | None:
    """"eval" for ``x.eval()`` / ``x.train(False)``, "train" for ``x.train()`` /
    ``x.train(True)`` (anything else: None)."""
    f = call.func
    if not isinstance(f, ast.Attribute) or call.keywords:
        return None
    if f.attr == "eval" and not call.args:
        return "eval"
    if f.attr == "train":
        if not call.args:
            return "train"
        a = call.args[0]
        if isinstance(a, ast.Constant) and a.value in (True, False):
            return "train" if a.value else "eval"
    return None


def _modes_on(ctx: Context, fn: ast.AST, receiver: str) -> set[str]:
    """The modes that ``fn`` (anywhere in its body) puts ``receiver`` in (one walk of ``fn``
    per file, for every receiver)."""
    def make() -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for n in walk(fn):
            m = _mode_call(n) if isinstance(n, ast.Call) else None
            if m:
                out.setdefault(dotted(n.func.value) or "", set()).add(m)  # type: ignore
        return out
    return ctx.memo("gt516-modes", fn, make).get(receiver, set())


class ModelLeftInEvalMode(LoopRule):
    """An evaluation inside the training loop leaves the model in eval mode.

    Why: `model.train()` runs once, before the epoch loop, and each epoch ends with an
    evaluation that calls `model.eval()` (directly or in an `evaluate(model)` helper) and never
    switches back: from the second epoch on the model trains in eval mode, with dropout off and
    batch-norm layers using (and no longer updating) their running statistics. Call
    `model.train()` at the start of every epoch.
    Known limits: said only when the model has a layer that behaves differently in eval mode
    (dropout, batch or instance norm, a `self.training` test) in its class of this file, its
    constructor call, or a torchvision / timm factory; the evaluation must be inline or in a
    function of this file.
    """

    code = "GT516"
    gate_statements = True
    name = "model-left-in-eval-mode"
    message = ("`{call}` runs once, before the loop, but `{evaluate}` (line {eval_line}) puts "
               "`{model}` in eval mode on every pass and nothing switches it back: every "
               "later pass trains with dropout off and batch-norm statistics frozen; call "
               "`{model}.train()` at the start of each pass")
    triggers = (".train(",)
    function_needs = (".train(",)
    examples = [
        Bad("""
            import torch.nn as nn
            model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 1))
            model.train()
            for epoch in range(10):
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
                model.eval()
                validate(model)
            """, at=(3, 0)),
        Good("""
            import torch.nn as nn
            model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 1))
            for epoch in range(10):
                model.train()
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
                model.eval()
                validate(model)
            """),
        Good("""
            import torch.nn as nn
            model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
            model.train()
            for epoch in range(10):
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
                model.eval()
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        for stmt in f.scope.stmts:
            for call in calls_in(stmt):
                model = dotted(call.func.value) if _mode_call(call) == "train" else None
                loop = _next_loop(f, stmt) if model else None
                if loop is None:
                    continue
                ev = _leaves_eval(f, ctx, loop, model)  # type: ignore[arg-type]
                if ev is not None and _has_mode_layers(f, ctx, model, call.lineno):  # type: ignore
                    yield self.report(call, ctx, related=(
                        related_at(ctx, ev, "the model is put in eval mode here, every pass"),),
                        call=ctx.source(call), evaluate=ctx.source(ev), model=model,
                        eval_line=ev.lineno)


def _next_loop(f: LoopFacts, stmt: ast.stmt) -> ast.stmt | None:
    """The first loop among the statements that follow ``stmt`` in its block."""
    path = f.paths.get(id(stmt))
    if not path:
        return None
    pid, field, i = path[-1]
    for s in f.blocks.get((pid, field), [])[i + 1:]:
        if isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
            return s
        if isinstance(s, (ast.Return, ast.Raise)):
            return None
    return None


def _statements(loop: ast.stmt) -> Iterator[ast.stmt]:
    """The statements nested in ``loop`` (not in nested functions or classes)."""
    todo = [loop]
    while todo:
        s = todo.pop()
        yield s
        for field in ("body", "orelse", "finalbody"):
            todo.extend(x for x in getattr(s, field, ()) or ()
                        if not isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef,
                                              ast.ClassDef)))
        for h in getattr(s, "handlers", ()) or ():
            todo.extend(h.body)


def _callee_param(ctx: Context, f: LoopFacts, call: ast.Call, model: str
                  ) -> tuple[ast.AST, str] | None:
    """(function of this file, the name ``model`` has there) for a call that hands it
    ``model`` (``evaluate(model, data)``) or a ``self.method()`` that reads ``self.<attr>``."""
    fn = ctx.analysis.callee(call, f.node)
    if fn is None or fn is f.node:
        return None
    for p, v in ctx.analysis.arguments(fn, call).items():  # type: ignore[arg-type]
        if dotted(v) == model:
            return fn, p
    if model.startswith("self.") and isinstance(call.func, ast.Attribute) \
            and dotted(call.func.value) == "self":
        return fn, model
    return None


def _leaves_eval(f: LoopFacts, ctx: Context, loop: ast.stmt, model: str) -> ast.Call | None:
    """The call in ``loop`` that puts ``model`` in eval mode after it trained there, when
    nothing in the loop switches it back to train mode."""
    trained_at: list[ast.stmt] = []
    evals: list[tuple[ast.stmt, ast.Call]] = []
    for s in _statements(loop):
        for call in calls_in(s) if s is not loop else ():
            mode = _mode_call(call)
            if mode is not None and dotted(call.func.value) == model:  # type: ignore[attr-defined]
                if mode == "train":
                    return None
                evals.append((s, call))
                continue
            target = _callee_param(ctx, f, call, model)
            if target is not None:
                fn, name = target
                modes = _modes_on(ctx, fn, name)
                if "train" in modes:
                    return None
                if "eval" in modes:
                    evals.append((s, call))
                    continue
                cf = facts(ctx, fn)
                if cf.steps and any(b.accumulates for b in cf.backwards):
                    trained_at.append(s)
    trained_at += [s.stmt for s in f.steps if f.inside(s.stmt, loop)]
    if not trained_at:
        return None
    return next((c for s, c in evals if any(f.before(t, s) for t in trained_at)), None)


def _has_mode_layers(f: LoopFacts, ctx: Context, model: str, line: int) -> bool:
    """The model has a layer that acts differently in eval mode (see the rule's limits)."""
    node = ast.parse(model, mode="eval").body
    kinds: list[Kind | None] = [ctx.analysis.kind(node, f.scope, line)]
    if kinds[0] is None and isinstance(f.node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
            and "." not in model:
        kinds = [ctx.analysis.kind_in(v, where, 10 ** 9)
                 for v, where in ctx.analysis.argument_values(f.node, model)]
    return bool(kinds) and all(k is not None and _kind_has_mode_layers(ctx, k) for k in kinds)


def _kind_has_mode_layers(ctx: Context, k: Kind, depth: int = 0) -> bool:
    if k.what != MODULE or depth > 4:
        return False
    if k.cls and k.cls.startswith(MODEL_FACTORIES):
        return True
    texts = [ctx.code_of(k.node)] if k.node is not None else []
    cls = ctx.analysis.classes.get(k.cls or "")
    if cls is not None:
        texts.append(ctx.code_of(cls.node))
    for text in texts:
        if MODE_LAYERS_RE.search(text):
            return True
        for name, other in ctx.analysis.classes.items():  # a submodule class of this file
            if other is not cls and other.is_module and re.search(rf"\b{name}\(", text) and \
                    _kind_has_mode_layers(ctx, Kind(MODULE, cls=name), depth + 1):
                return True
    return False
