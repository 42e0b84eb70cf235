"""GT516: an evaluation inside the training loop leaves the model in eval mode."""
from __future__ import annotations

import ast
import re
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.kinds import MODULE, Kind
from gradtrace.lint.analysis.last_pass import only_on_last_pass
from gradtrace.lint.analysis.mode_layers import mode_layers
from gradtrace.lint.analysis.vocabulary import MODEL_FACTORIES
from gradtrace.lint.context import LOOP_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.rules.training_loop._loop import LoopFacts, facts
from gradtrace.lint.rules.training_loop._base import LoopRule, function_text, related_at
from gradtrace.lint.analysis.callees import resolve
from gradtrace.lint.call_words import WORD_RE, call_test, called_names
from gradtrace.lint.rules.training_loop._modes import MAX_DEPTH, covers, effects, mode_call

# layers that behave differently in train and eval mode; an `InstanceNorm*` only with
# `track_running_stats=True` (`_tracking_instance_norm`: by default it normalises each
# sample by its own statistics in both modes; NOTE [running statistics])
# (Dropout, BatchNorm, a `self.training` test: read from the code, NOTE [mode layers built])
_INSTANCE_NORM_RE = re.compile(r"\bInstanceNorm\w*")


def _tracking_instance_norm(node: ast.AST) -> bool:
    """A call under ``node`` that builds (or binds, ``partial(nn.InstanceNorm2d, ...)``) an
    instance norm with ``track_running_stats`` not literally false, given as a keyword."""
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and any(
                k.arg == "track_running_stats" and not (
                    isinstance(k.value, ast.Constant) and not k.value.value)
                for k in n.keywords) and any(
                _INSTANCE_NORM_RE.search(dotted(e) or "") for e in (n.func, *n.args)):
            return True
    return False


def _train_wrappers(ctx: Context) -> frozenset[str]:
    """Names of the file's functions and methods whose text calls ``.train(`` (a cheap gate
    before resolving a call as a wrapper such as ``model.train_start()``)."""
    def make() -> frozenset[str]:
        defs = list(ctx.analysis.functions.values()) + [
            m for c in ctx.analysis.classes.values() for m in c.methods.values()]
        return frozenset(d.name for d in defs if ".train(" in ctx.code_of(d))
    return ctx.memo("gt516-wrappers", ctx.tree, make)


def _starts_training(ctx: Context, f: LoopFacts, call: ast.Call) -> list[str]:
    """The receivers ``call`` puts in train mode: ``model.train()`` itself, or a function or
    method of this file that does (``model.train_start()`` -> ``model.img_enc``...)."""
    if mode_call(call) is not None:
        return [dotted(call.func.value) or ""] if mode_call(call) == "train" else []  # type: ignore[attr-defined]
    f_ = call.func
    name = f_.attr if isinstance(f_, ast.Attribute) else getattr(f_, "id", None)
    if name is None or name not in _train_wrappers(ctx):
        return []
    return sorted(r for r, m in effects(ctx, f.node, call).items() if r and m == {"train"})


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
    message = "{detail}"
    once = ("`{call}` (line {train_line}) runs once, before the loop, but `{evaluate}` "
            "(line {eval_line}) puts `{model}` in eval mode {where} the training loop and "
            "nothing switches it back: every later step trains with dropout off and "
            "batch-norm statistics frozen; {remedy}")
    never = ("`{evaluate}` (line {line}) puts `{model}` in eval mode on every pass of the loop "
             "at line {loop} and nothing in the loop puts it back in train mode: from the "
             "second pass on, `{fwd}` trains it with dropout off and batch-norm statistics "
             "frozen; call {remedy}")
    triggers = (".train(", ".eval(")
    statement_triggers = ("train", ".eval(", ".step(")
    function_needs = ()
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

    def _entry(self, node: ast.AST, ctx: Context) -> Iterator[Finding]:
        """Only a function that switches a mode, itself or through a function of the file
        (a scheduler's `.step(` alone builds no loop facts here)."""
        if _switches(ctx, function_text(ctx, node)):
            yield from self.check(facts(ctx, node), ctx)

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        done: set[int] = set()
        for stmt in f.scope.stmts:
            for call in f.calls_of(stmt):
                models = _starts_training(ctx, f, call)
                loop = _next_loop(f, stmt) if models else None
                if loop is None:
                    continue
                for model in models:
                    got = _leaves_eval(f, ctx, loop, model)
                    if got is None or not _has_mode_layers(f, ctx, model, call.lineno):
                        continue
                    ev, mid = got
                    where = "inside" if mid else "at the end of each pass of"
                    again = f"call `{model}.train()`" if mode_call(call) else \
                        f"call `{ctx.source(call)}` again"
                    remedy = again + (" right after it" if mid else " at the start of each pass")
                    related = (related_at(ctx, call, "train mode is set once, here"),) if mid \
                        else (related_at(ctx, ev, "the model is put in eval mode here"),)
                    done.add(id(loop))
                    yield self.report(ev if mid else call, ctx, related=related, detail=(
                        self.once.format(call=ctx.source(call), evaluate=ctx.source(ev),
                                         model=model, eval_line=ev.lineno, where=where,
                                         train_line=call.lineno, remedy=remedy)))
                    break
        yield from self._never_set(f, ctx, done)

    def _never_set(self, f: LoopFacts, ctx: Context, done: set[int]) -> Iterator[Finding]:
        """Loops that train a model and evaluate it, with no ``train()`` before them: the
        model starts in train mode (a new module does), so only the first pass trains it so."""
        for loop in f.scope.stmts:
            if not isinstance(loop, LOOP_TYPES) or id(loop) in done or f.loops_of(loop) \
                    or not _mentions_eval(ctx, loop):
                continue
            for model in _evaluated(f, ctx, loop):
                got = _leaves_eval(f, ctx, loop, model, after=True)
                if got is None or not _has_mode_layers(f, ctx, model, loop.lineno):
                    continue
                ev = got[0]
                site = _forward_site(f, ctx, loop, model)
                if site is None and _only_run_grad_off(f, loop, model):
                    continue  # it only runs for evaluation here (under no_grad)
                fwd, remedy = site or (
                    ev, f"`{model}.train()` at the start of each training pass")
                yield self.report(ev, ctx, related=(  # the switch leads, as GT516 at run time
                    related_at(ctx, fwd, "from the second pass on it trains in eval mode "
                               "here"),) if fwd is not ev else (), detail=(
                    self.never.format(model=model, evaluate=ctx.source(ev), line=ev.lineno,
                                      loop=loop.lineno, fwd=ctx.source(fwd), remedy=remedy)))
                break


def _switches(ctx: Context, text: str) -> bool:
    """``text`` calls ``.train(`` / ``.eval(`` or a function of the file that does."""
    if ".train(" in text or ".eval(" in text:
        return True
    calls = ctx.memo("gt516-switch-calls", ctx.tree,
                     lambda: call_test(_train_wrappers(ctx) | _eval_wrappers(ctx)))
    return calls is not None and calls(text)


def _mentions_eval(ctx: Context, loop: ast.stmt) -> bool:
    """The loop's text calls ``.eval()`` / ``.train(False)`` or a function of the file whose
    text does (a cheap gate before resolving calls)."""
    text = "\n".join(ctx.code_lines[loop.lineno - 1:loop.end_lineno])
    if ".eval(" in text or ".train(False" in text:
        return True
    calls = ctx.memo("gt516-eval-calls", ctx.tree, lambda: call_test(_eval_wrappers(ctx)))
    return calls is not None and calls(text)


def _eval_wrappers(ctx: Context) -> frozenset[str]:
    """Names of the file's functions and methods whose text puts something in eval mode."""
    def make() -> frozenset[str]:
        defs = list(ctx.analysis.functions.values()) + [
            m for c in ctx.analysis.classes.values() for m in c.methods.values()]
        texts = {d.name: ctx.code_of(d) for d in defs}
        got = {n for n, t in texts.items() if ".eval(" in t or ".train(False" in t}
        for _ in range(MAX_DEPTH - 1):  # and the functions calling those (effects' depth)
            if got:
                calls = call_test(got)
                got |= {n for n, t in texts.items() if n not in got and calls(t)}  # type: ignore[misc]
        return frozenset(got)
    return ctx.memo("gt516-eval-wrappers", ctx.tree, make)


def _evaluated(f: LoopFacts, ctx: Context, loop: ast.stmt) -> list[str]:
    """The receivers (in this function's names) that calls in ``loop`` put in eval mode."""
    out: list[str] = []
    for s in f.within(loop):
        for call in f.calls_of(s) if s is not loop else ():
            for r, ms in effects(ctx, f.node, call).items():
                if r and "eval" in ms and r not in out:
                    out.append(r)
    return out


def _forward_site(f: LoopFacts, ctx: Context, loop: ast.stmt, model: str
                  ) -> tuple[ast.Call, str] | None:
    """The call that runs ``model`` forward for training in ``loop`` and where ``train()``
    belongs: inline, or in the training function of the file it calls (``train(model, ...)``
    running ``model(x)``)."""
    for s in f.within(loop):
        for call in f.calls_of(s) if s is not loop else ():
            if dotted(call.func) == model:
                if f.scope.grad_off_at(call) is not None:
                    continue  # an evaluation pass, not the training forward
                return call, f"`{model}.train()` at the start of each training pass"
            target = resolve(ctx, f.node, call)
            if target is None or not _trains(ctx, target[0]):
                continue
            node = _runs(target, model)
            if node is not None:
                return node, f"`{dotted(node.func)}.train()` at the start of " \
                    f"`{target[0].name}()`"  # type: ignore[attr-defined]
    return None


def _only_run_grad_off(f: LoopFacts, loop: ast.stmt, model: str) -> bool:
    """``model`` is called in ``loop``, and only with grad off (``with torch.no_grad():``)."""
    calls = [c for s in f.within(loop) if s is not loop for c in f.calls_of(s)
             if dotted(c.func) == model]
    return bool(calls) and all(f.scope.grad_off_at(c) is not None for c in calls)


def _runs(target: tuple[ast.AST, dict[str, str]], model: str) -> ast.Call | None:
    """The first call in the function of ``target`` (a resolved call: function, parameter ->
    the caller's name) that runs the caller's ``model`` forward."""
    names = [p for p, v in target[1].items() if v == model]
    for node in ast.walk(target[0]) if names else ():
        if isinstance(node, ast.Call) and dotted(node.func) in names:
            return node
    return None


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


def _leaves_eval(f: LoopFacts, ctx: Context, loop: ast.stmt, model: str, after: bool = False
                 ) -> tuple[ast.Call, bool] | None:
    """(the call in ``loop`` that puts ``model`` in eval mode while the loop trains it, whether
    it sits in the very loop that runs the training step), when nothing in the loop switches
    it back to train mode (a train-mode call on a part of unknown name counts). ``after``:
    only an evaluation that follows the training in the pass."""
    trained_at: list[ast.stmt] = []
    both: list[ast.Call] = []
    evals: list[tuple[ast.stmt, ast.Call]] = []
    for s in _statements(loop):
        for call in f.calls_of(s) if s is not loop else ():
            eff = effects(ctx, f.node, call)
            if any("train" in ms and (not r or covers(r, model) or covers(model, r))
                   for r, ms in eff.items()):
                return None  # back to train mode (also: a part of it, to be safe)
            evaluates = any("eval" in ms and r and covers(r, model) for r, ms in eff.items())
            # the model itself or its owner: a submodule kept in eval on purpose (batch norm
            # frozen in a training step) is not the whole model
            if evaluates:
                evals.append((s, call))
            target = resolve(ctx, f.node, call) if not eff or evaluates else None
            if target is not None and _trains(ctx, target[0]):
                if not evaluates:
                    trained_at.append(s)
                elif _evaluates_after(ctx, target, model):
                    both.append(call)  # one call trains the model, then evaluates it
    if both:
        return both[0], False
    trained_at += [s.stmt for s in f.steps if f.inside(s.stmt, loop)]
    evals = [(s, c) for s, c in evals  # NOTE [last pass]: no pass of the loop follows it
             if not only_on_last_pass((f.loops_of(s) or (None,))[-1], s)
             or (f.loops_of(s) or (None,))[-1] is not loop]
    if not trained_at or not evals:
        return None
    for s, c in evals:
        inner = (f.loops_of(s) or (None,))[-1]
        if inner is not None and f.inside(inner, loop) and _conditional_in(inner, s) and any(
                (f.loops_of(t) or (None,))[-1] is inner for t in trained_at):
            return c, True  # a periodic validation in the middle of the loop that trains
    for s, c in evals:
        if any(f.before(t, s) or not after and f.before(s, t) for t in trained_at):
            return c, False
    return None


def _evaluates_after(ctx: Context, target: tuple[ast.AST, dict[str, str]], model: str) -> bool:
    """The function of ``target`` runs the caller's ``model`` forward, then (on a later line)
    puts it in eval mode: it trains the model, then evaluates it."""
    fwd = _runs(target, model)
    names = {p for p, v in target[1].items() if v == model}
    return fwd is not None and any(
        isinstance(c, ast.Call) and c.lineno > fwd.lineno and any(
            "eval" in ms and r.partition(".")[0] in names
            for r, ms in effects(ctx, target[0], c, 1).items())
        for c in ast.walk(target[0]))


def _trains(ctx: Context, fn: ast.AST) -> bool:
    """``fn`` (a function of the file) runs a training step: a backward and a step."""
    cf = facts(ctx, fn)
    return bool(cf.steps) and any(b.accumulates for b in cf.backwards)


def _conditional_in(loop: ast.stmt, s: ast.stmt) -> bool:
    """``s`` runs under an ``if`` of ``loop``'s body (not of a nested loop)."""
    todo: list[tuple[ast.stmt, bool]] = [(x, False) for x in loop.body]  # type: ignore[attr-defined]
    while todo:
        x, cond = todo.pop()
        if x is s:
            return cond
        if isinstance(x, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef,
                          ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        under = cond or isinstance(x, ast.If)
        for field in ("body", "orelse", "finalbody"):
            todo.extend((y, under) for y in getattr(x, field, ()) or ())
        for h in getattr(x, "handlers", ()) or ():
            todo.extend((y, under) for y in h.body)
    return False


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
    nodes = [n for n in (k.node, cls.node if cls is not None else None) if n is not None]
    for text, node in zip(texts, nodes):
        if mode_layers(node, ctx) or (
                _INSTANCE_NORM_RE.search(text) and _tracking_instance_norm(node)):
            return True
        called: frozenset[str] | None = None  # the text's `name(` words, found once
        for name, other in ctx.analysis.classes.items():  # a submodule class of this file
            if other is cls or not other.is_module:
                continue
            if WORD_RE.fullmatch(name):  # `\bname\(` (NOTE [called words])
                called = called_names(text) if called is None else called
                hit = name in called
            else:
                hit = re.search(rf"\b{name}\(", text) is not None
            if hit and _kind_has_mode_layers(ctx, Kind(MODULE, cls=name), depth + 1):
                return True
    return _given_mode_layers(ctx, k, depth)


def _given_mode_layers(ctx: Context, k: Kind, depth: int) -> bool:
    """A module class of the file built around a module it is given (``Trainer(pose_net,
    loss)`` keeping ``self.model = model``): the layers of that argument are its own."""
    call = k.node
    cls = ctx.analysis.classes.get(k.cls or "")
    if not isinstance(call, ast.Call) or cls is None or not call.args:
        return False
    where = _function_at(ctx, call)
    for a in call.args:
        got = ctx.analysis.kind_in(a, where, call.lineno)
        if got is not None and got.what == MODULE and got.node is not call \
                and _kind_has_mode_layers(ctx, got, depth + 1):
            return True
    return False


def _function_at(ctx: Context, node: ast.AST) -> ast.AST:
    """The innermost def holding ``node`` (the module when none does)."""
    def make() -> list[ast.AST]:
        return sorted((n for n in ast.walk(ctx.tree) if isinstance(
            n, (ast.FunctionDef, ast.AsyncFunctionDef))), key=lambda n: -n.lineno)
    line = getattr(node, "lineno", 0)
    return next((fn for fn in ctx.memo("gt5-defs-by-line", ctx.tree, make)
                 if fn.lineno <= line <= (fn.end_lineno or 0)), ctx.tree)
