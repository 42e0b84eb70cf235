"""GT201, GT202, GT207: a loss whose every input was made with grad disabled."""
from __future__ import annotations

import ast
from dataclasses import replace
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.analysis.steps import backward_loss
from gradtrace.lint.analysis.grad_sources import Dead, Deps
from gradtrace.lint.analysis.helper_sources import grad_sources
from gradtrace.lint.analysis.cuts import Cut
from gradtrace.lint.analysis.grad_off_returns import GRAD_OFF
from gradtrace.lint.analysis.helper_cuts import cut_away
from gradtrace.lint.analysis.loss_evidence import backwards_itself
from gradtrace.lint.analysis.same_line import bound_earlier_on_line
from gradtrace.lint.rules.graph_breaks._base import LossCutRule, related_for, short
from gradtrace.lint.rules.graph_breaks._paths import LossPaths, Verdict

GRAD_WORDS = ("no_grad", "inference_mode", "set_grad_enabled")
ELEMENT0 = "`RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn`"


class _LossTraceRule(Rule):
    """Shared visitor: trace the differentiated loss of each backward call to its sources."""

    triggers = ("backward", "training_step")

    def _trace(self, node: ast.AST, ctx: Context) -> tuple[ast.expr, Deps] | None:
        """The loss and its sources when every source is made under grad-off; traced once per
        backward call for all the GT2 rules (read-only)."""
        if not ctx.mentions(*GRAD_WORDS):
            return None
        return ctx.memo("gt2-dead-loss", node, lambda: _dead_loss(node, ctx))

    def _lightning(self, ctx: Context) -> bool:
        """Whether the file has a ``training_step`` (cached per file)."""
        return ctx.memo("gt2-has-step", ctx.tree, lambda: ctx.mentions("training_step"))

    def _first_time(self, off: ast.AST, ctx: Context) -> bool:
        """Whether this rule reports ``off`` for the first time in this file."""
        seen: set[int] = ctx.memo("gt2-reported-" + self.code, ctx.tree, set)
        if id(off) in seen:
            return False
        seen.add(id(off))
        return True


def _dead_loss(node: ast.AST, ctx: Context) -> tuple[ast.expr, Deps] | None:
    loss = backward_loss(node, ctx) if isinstance(node, ast.Call) else _returned_loss(node, ctx)
    if loss is None or _error_expected(ctx) or bound_earlier_on_line(ctx.scope(), loss, node):
        return None  # (the last: NOTE [bound earlier on the same line])
    deps = grad_sources(ctx, ctx.scope().node).sources(loss, node.lineno, stop_on_live=True)
    if not deps.dead or deps.live or deps.unknown or deps.explicit_grad:
        return None
    return loss, deps


CAUGHT = frozenset({"RuntimeError", "Exception", "BaseException"})


def _error_expected(ctx: Context) -> bool:
    """The backward's own statement is in the body of a ``try`` whose handler takes the error
    it would raise (``RuntimeError``, ``Exception``, or every error) and goes on without
    raising again: the program expects that call to fail (a tutorial showing the error,
    Atcold's autograd notebook). A handler that raises again (``if "out of memory" not in
    str(e): raise``) lets it out; a ``try`` around a whole loop or step is no probe of it."""
    stack = ctx.stmts
    if len(stack) < 2:
        return False
    s, stmt = stack[-2], stack[-1]
    return isinstance(s, ast.Try) and any(stmt is b for b in s.body) and any(
        _takes(h) and not any(isinstance(n, ast.Raise) for n in walk(h)) for h in s.handlers)


def _takes(h: ast.ExceptHandler) -> bool:
    types = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
    return h.type is None or any(dotted(t) in CAUGHT for t in types if t is not None)


def _sink_text(node: ast.AST, ctx: Context) -> str:
    if isinstance(node, ast.Return):
        return f"the backward Lightning runs on `{ctx.source(node)}`"
    return f"`{ctx.source(node)}`"


def _returned_loss(node: ast.AST, ctx: Context) -> ast.expr | None:
    """The loss a Lightning ``training_step`` returns (Lightning calls backward on it)."""
    fn = ctx.function
    if not isinstance(node, ast.Return) or node.value is None or fn is None \
            or fn.name != "training_step" or backwards_itself(ctx, fn):
        return None  # a step that runs its own backward returns what it logs (loss evidence)
    v = node.value
    if isinstance(v, ast.Dict):
        return next((val for k, val in zip(v.keys, v.values)
                     if isinstance(k, ast.Constant) and k.value == "loss"), None)
    return v


def _with_text(off: ast.AST, ctx: Context) -> str:
    if isinstance(off, (ast.With, ast.AsyncWith)):
        return ctx.source(off.items[0].context_expr)
    return "@" + ctx.source(off)


def _backward_related(node: ast.AST, ctx: Context) -> Related:
    if isinstance(node, ast.Return):
        return Related(ctx.path, node.lineno, "Lightning calls `backward()` on this returned loss "
                       f"and it raises {ELEMENT0}", ctx.column(node))
    return Related(ctx.path, node.lineno, f"`{ctx.source(node)}` raises {ELEMENT0} here",
                   ctx.column(node))


def _value_related(dead: Dead, ctx: Context, what: str) -> Related:
    return Related(ctx.path, dead.expr.lineno, what, ctx.column(dead.expr))  # type: ignore[attr-defined]


class LossFromNoGradOutput(_LossTraceRule):
    """The loss is built only from outputs computed under `no_grad`/`inference_mode`.

    Why: inside `torch.no_grad()` (or `inference_mode()`, or `set_grad_enabled(False)`)
    PyTorch records no graph: the logits have `requires_grad=False` and no `grad_fn`. A loss made
    only from them has no path to any parameter, so `loss.backward()` raises
    `RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn`
    (pytorch-facts.md#no-graph-loss, pytorch-facts.md#partly-cut-graph). Compute the training
    forward outside the no-grad block.
    A target made under `no_grad` (EMA teacher, DQN target) next to a prediction that has a
    graph is a stop-gradient by design and is not reported.
    Known limits: one function (plus helpers of the same file); a loss term that is dead next
    to a live term (backward then succeeds, the dead term trains nothing) is left to the
    runtime (`gradtrace run`); calling an object this function got from a call it cannot type
    (`train_model, opt = accelerator.prepare(...)`) counts as running a model.
    """

    code = "GT201"
    # visit_Return reports only in a function named training_step (a trigger word)
    gate_statements = "function"
    name = "loss-from-no-grad-output"
    message = ("`{value}` is computed under `{mode}`, and the loss that {sink} (line {line}) "
               "differentiates is built only from such values: no gradient can reach the model")
    examples = [
        Bad("""
            import torch
            import torch.nn.functional as F

            def train(model, loader, opt):
                for x, y in loader:
                    with torch.no_grad():
                        logits = model(x)
                    loss = F.cross_entropy(logits, y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            """, at=(6, 8)),
        Bad("""
            import torch
            import torch.nn.functional as F

            class Classifier:
                def training_step(self, batch, batch_idx):
                    x, y = batch
                    with torch.no_grad():
                        logits = self(x)
                    return F.cross_entropy(logits, y)
            """, at=(7, 8)),
        Good("""
            import torch
            import torch.nn.functional as F

            def distill(student, teacher, loader, opt):
                for x, y in loader:
                    with torch.no_grad():
                        target = teacher(x)
                    loss = F.mse_loss(student(x), target)
                    loss.backward()
                    opt.step()
            """),
        Good("""
            import torch

            def validate(model, loader, criterion):
                with torch.no_grad():
                    for x, y in loader:
                        loss = criterion(model(x), y)
                return loss.item()
            """),
        Good("""
            import torch

            def train(backbone, head, loader, opt, criterion):
                for x, y in loader:
                    with torch.no_grad():
                        feats = backbone(x)
                    loss = criterion(head(feats), y)
                    loss.backward()
                    opt.step()
            """),
    ]

    def visit_Return(self, node: ast.Return, ctx: Context) -> Iterator[Finding]:
        if self._lightning(ctx):
            yield from self.visit_Call(node, ctx)  # type: ignore[arg-type]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if ctx.grad_disabled is not None:
            return
        found = self._trace(node, ctx)
        if found is None:
            return
        _, deps = found
        local = [d for d in deps.dead if d.helper is None]
        if not local or len(local) != len(deps.dead) or not self._first_time(local[0].off, ctx):
            return
        dead = local[0]
        value = _bound_name(dead.expr, ctx) or ctx.source(dead.expr)
        related = (_value_related(dead, ctx, f"`{value}` is computed here without a graph"),
                   _backward_related(node, ctx))
        yield self.report(dead.off, ctx, related=related, value=value,
                          mode=_with_text(dead.off, ctx), sink=_sink_text(node, ctx),
                          line=node.lineno)


class NoGradInTrainingHelper(_LossTraceRule, LossCutRule):
    """A helper called by the training step returns values computed under `no_grad`.

    Why: grad mode is global state, so `with torch.no_grad():` (or `@torch.no_grad()`) inside
    a helper also cuts the graph of the training step that calls it. When the loss is built
    only from what the helper returns, `loss.backward()` raises
    `RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn`
    (pytorch-facts.md#no-graph-loss). When only one term of the loss is built from it, backward
    runs and that term adds nothing to any gradient: the layers the helper runs (a refinement
    decoder, a projection head) never train (pytorch-facts.md#partly-cut-graph). Move the
    no-grad block to the evaluation code, or return the values with a graph.
    Known limits: helpers defined in the same file, called by name, as `self.<name>`, as a
    method of an instance of a class of the file (`self.model.refine(h)`), or run by calling
    such an instance (its `forward` or `__call__`, one inherited from a base class of the file
    included: NOTE [inherited methods]); every `return` of
    the helper must give a value computed in one grad-off region (NOTE [grad-off returns]).
    """

    code = "GT202"
    gate_statements = True
    name = "no-grad-in-training-helper"
    message = ("`{helper}` computes its result under `{mode}`, and the training step uses it "
               "as the only input of the loss that {sink} (line {line}) differentiates")
    message_term = ("`{helper}` computes its result under `{mode}`, and the term `{term}` of "
                    "the loss that `backward()` (line {line}) differentiates is built only "
                    "from it: backward runs, the term adds nothing to any gradient, and the "
                    "layers `{helper}` runs get no gradient from it")
    cut_kinds = frozenset({GRAD_OFF})
    file_needs = GRAD_WORDS
    examples = [
        Bad("""
            import torch
            import torch.nn.functional as F

            @torch.no_grad()
            def forward_batch(model, x):
                return model(x)

            def train_step(model, x, y, opt):
                logits = forward_batch(model, x)
                loss = F.cross_entropy(logits, y)
                loss.backward()
                opt.step()
            """, at=(4, 1)),
        Good("""
            import torch
            import torch.nn.functional as F

            @torch.no_grad()
            def predict(model, x):
                return model(x).argmax(-1)

            def train_step(model, x, y, opt):
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                return predict(model, x)
            """),
    ]

    def visit_Return(self, node: ast.Return, ctx: Context) -> Iterator[Finding]:
        if self._lightning(ctx):
            yield from self.visit_Call(node, ctx)  # type: ignore[arg-type]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if ctx.grad_disabled is not None:
            return
        found = self._trace(node, ctx)
        if found is None:
            return
        _, deps = found
        helpers = [d for d in deps.dead if d.helper is not None]
        if not helpers or not self._first_time(helpers[0].off, ctx):
            return
        dead = helpers[0]
        if not _first_line(ctx, dead.off.lineno):  # type: ignore[attr-defined]
            return
        name = getattr(dead.helper, "name", "helper")
        related = (_value_related(dead, ctx, f"the training step calls `{name}` here"),
                   _backward_related(node, ctx))
        yield self.report(dead.off, ctx, related=related, helper=name,
                          mode=_with_text(dead.off, ctx), sink=_sink_text(node, ctx),
                          line=node.lineno)


    def finding(self, c: Cut, v: Verdict, lp: LossPaths, ctx: Context) -> Finding | None:
        """A term (or the whole loss) cut by a helper's grad-off region, found by the GT1
        loss paths (NOTE [grad-off returns])."""
        if v.sink.how != "backward" or not _first_line(ctx, c.node.lineno):
            return None
        helper = next((n[:-2] for n, _ in reversed(c.via) if n.endswith("()")), "helper")
        line = v.sink.node.lineno  # type: ignore[attr-defined]
        away = cut_away(ctx, c.node)  # a region of another file: its code (NOTE [project index])
        mode = away.code if away is not None else ctx.source(c.node)
        if away is None and ctx.line_text(c.node.lineno).lstrip().startswith("@"):
            mode = "@" + mode
        f = self.report(c.node, ctx, related=related_for(c, v, ctx), helper=helper, mode=mode,
                        sink=f"`{short(ctx.source(v.sink.node), 40)}`", line=line)
        if v.full:
            return f
        term = next((t for t, cuts in v.cut_terms if c in cuts), v.sink.value)
        return replace(f, message=self.message_term.format(
            helper=helper, mode=mode, term=short(ctx.source(term), 40), line=line))


def _first_line(ctx: Context, line: int) -> bool:
    """Whether GT202 reports on ``line`` for the first time in this file (its two paths, the
    grad-source trace and the loss paths, may find one region twice)."""
    seen: set[int] = ctx.memo("gt202-lines", ctx.tree, set)
    if line in seen:
        return False
    seen.add(line)
    return True


class BackwardUnderNoGrad(_LossTraceRule):
    """`backward()` runs inside the no-grad block that also computed the loss.

    Why: the forward inside `torch.no_grad()` / `inference_mode()` records no graph, so the loss
    has no `grad_fn` and `loss.backward()` raises
    `RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn`
    (pytorch-facts.md#no-graph-loss, pytorch-facts.md#grad-mode-left-off). Calling `backward()`
    under `no_grad` on a loss built *outside* it
    works, and is not reported. Take the training step out of the no-grad block. In an
    evaluation pass (`model.eval()` before the block) the `backward()` is what does not belong,
    and it is the line reported.
    Known limits: the loss must be computed in the same function.
    """

    code = "GT207"
    gate_statements = True
    name = "backward-under-no-grad"
    message = ("`{sink}` (line {line}) runs inside `{mode}`, which also computed the loss: "
               "the loss has no graph")
    message_eval = ("`{sink}` runs in an evaluation pass (`.eval()` at line {line}, then "
                    "`{mode}` at line {off}, which also computed the loss): the loss has no graph, "
                    "so this raises `RuntimeError: element 0 of tensors does not require grad and "
                    "does not have a grad_fn`; validation must not call `backward()`/`step()` "
                    "(train in the training step instead)")
    examples = [
        Bad("""
            import torch

            def train(model, loader, opt, criterion):
                model.train()
                with torch.no_grad():
                    for x, y in loader:
                        loss = criterion(model(x), y)
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
            """, at=(5, 4)),
        Bad("""
            import torch

            @torch.inference_mode()
            def step(model, x, opt):
                model(x).sum().backward()
                opt.step()
            """, at=(3, 1)),
        Bad("""
            import torch

            def validate(model, x, y, opt, criterion):
                model.eval()
                with torch.no_grad():
                    loss = criterion(model(x), y)
                    loss.backward()
                    opt.step()
            """, at=(7, 8)),
        Good("""
            import torch

            def train(model, x, y, opt, criterion):
                loss = criterion(model(x), y)
                with torch.no_grad():
                    loss.backward()
                opt.step()
            """),
        Good("""
            import torch

            def sgd(w, x, y, lr):
                loss = ((x @ w - y) ** 2).mean()
                loss.backward()
                with torch.no_grad():
                    w -= lr * w.grad
                    w.grad.zero_()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        off = ctx.grad_disabled
        if off is None:
            return
        found = self._trace(node, ctx)
        if found is None or not self._first_time(off, ctx):
            return
        ev = _evaluation_switch(ctx, off)
        if ev is not None and not _trains_again(ctx, off, node):  # an evaluation pass: the backward is what does not belong here
            f = self.report(node, ctx, related=(Related(
                ctx.path, off.lineno, "grad is disabled here", ctx.column(off)),),  # type: ignore[attr-defined]
                sink="", line=0, mode="")
            yield replace(f, message=self.message_eval.format(
                sink=" ".join(ctx.source(node).split())[:60], mode=_with_text(off, ctx),
                line=ev.lineno, off=off.lineno))  # type: ignore[attr-defined]
            return
        yield self.report(off, ctx, related=(_backward_related(node, ctx),),
                          sink=ctx.source(node), line=node.lineno, mode=_with_text(off, ctx))


def _evaluation_switch(ctx: Context, off: ast.AST) -> ast.Call | None:
    """The ``m.eval()`` call that precedes the no-grad block ``off`` in the same function: the
    function is an evaluation pass (eval mode and no grad), not a training step."""
    line = off.lineno  # type: ignore[attr-defined]
    for m in ctx.scope().calls_to("eval"):
        if m.call.lineno < line and not m.call.args and not m.call.keywords:
            return m.call
    return None


def _trains_again(ctx: Context, off: ast.AST, sink: ast.Call) -> bool:
    """A ``m.train()`` inside the no-grad block ``off``, before ``sink``: after the evaluation
    the block goes on to a training pass (a training loop indented into the validation's
    ``with torch.no_grad():``), so the block, not the backward, is what is misplaced."""
    lo, hi = off.lineno, sink.lineno  # type: ignore[attr-defined]
    end = getattr(off, "end_lineno", None) or hi
    for m in ctx.scope().calls_to("train"):
        c = m.call
        if lo < c.lineno < hi <= end and len(c.args) <= 1 and not c.keywords and (
                not c.args or isinstance(c.args[0], ast.Constant) and c.args[0].value is True):
            return True
    return False


def _bound_name(expr: ast.AST, ctx: Context) -> str | None:
    """The name a value is assigned to (``logits`` for ``logits = model(x)``)."""
    s = ctx.scope().statement_of(expr)
    if isinstance(s, ast.Assign) and s.value is expr and len(s.targets) == 1:
        return ctx.source(s.targets[0])
    return None
