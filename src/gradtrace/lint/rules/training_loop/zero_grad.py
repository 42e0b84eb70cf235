"""GT501-GT503: where gradients are cleared relative to backward() and step()."""
from __future__ import annotations

import ast
import bisect
import re
from dataclasses import replace
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.callees import resolve
from gradtrace.lint.analysis.steps import calls_in, step_calls
from gradtrace.lint.analysis.unobserved import unobserved_training
from gradtrace.lint.code_text import block_end, commented_out_call
from gradtrace.lint.nodes import walk
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.rules.training_loop._base import BACKWARD_CALLS, LoopRule, related_at
from gradtrace.lint.rules.training_loop._loop import (
    MANUAL_ZERO_RE, Backward, LoopFacts, Named, Step, uncleared_optimizers)
from gradtrace.lint.analysis.clearing_steps import self_managed
from gradtrace.lint.rules.training_loop._part_zero import part_clearing, part_of
from gradtrace.lint.rules.training_loop._reach import for_another
from gradtrace.lint.rules.training_loop._clear_facts import (
    covers, fresh_each_pass, may_clear_elsewhere, may_clear_model, per_call_step, step_loop)

# clearing gradients other than by zero_grad(): `p.grad = None`, `p.grad.zero_()`, ...
OTHER_ZERO_RE = re.compile(
    r"\.grad\s*=[^=]|\.grad\.(?:data\.)?(?:zero_|detach_|fill_|mul_)|set_to_none"
    r"|(?:clear|reset|free)_?grads?\b|grads?_?(?:clear|reset)", re.IGNORECASE)
# a step guarded by "last batch of the epoch" runs once per pass of the outer loop
ONCE_PER_PASS_RE = re.compile(r"len\(|last|final|end", re.IGNORECASE)


class MissingZeroGrad(LoopRule):
    """A training loop or step function runs `backward()` and `step()` but never clears grads.

    Why: `backward()` *adds* into `.grad`; nothing resets it but `zero_grad()` (or setting
    `p.grad = None`). Without it, step N applies the sum of the gradients of batches 1..N, so
    updates grow with every step and training diverges or stalls
    (pytorch-facts.md#zero-grad-order: the
    usual order is zero_grad → backward → step; zero_grad may also come after step).
    A function without such a loop that backwards and steps an optimizer it does not receive
    as an argument (`self.optimizer`, a global) is a training step run once per batch
    (`train_step`, `update`): each call adds to what the last one left.
    Known limits: a function that clears gradients in any way (`zero_grad`, `.grad = None`, a
    helper whose name says so) is trusted; a helper with another name that clears them is not
    seen, and the rule stays silent when the loop builds a new optimizer or model or hands the
    optimizer to a call that might clear it (not one named like saving, logging or
    evaluating: `self.save_model(dir, optimizer)` clears nothing, nor a function of this file
    that clears nothing and passes the optimizer on to no call: `adjust_learning_rate`). A step
    function is trusted when it receives the optimizer or the loss as an argument, is named
    `test*`, or is called by a function of this file that clears gradients. Nor is a loop of a
    function that builds its model and optimizer for itself and shows nothing they compute
    (a throughput benchmark: no print, return, save or other read of the model, its outputs
    or its loss): the summed gradients move weights nothing reads (NOTE [unobserved training]).
    """

    code = "GT501"
    gate_statements = True
    name = "missing-zero-grad"
    message = ("`{call}` adds into `.grad` {where} but `{opt}`'s gradients are never "
               "cleared: `{opt}.step()` (line {step_line}) applies the sum of all earlier "
               "{units}' gradients; call `{opt}.zero_grad()` before this backward")
    triggers = BACKWARD_CALLS
    examples = [
        Bad("""
            import torch
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                loss = torch.nn.functional.mse_loss(model(x), y)
                loss.backward()
                opt.step()
            """, at=(5, 4)),
        Bad("""
            def train_one_epoch(model, loader, optimizer, scaler):
                for batch in loader:
                    with torch.autocast("cuda"):
                        loss = model(**batch).loss
                    scaler.scale(loss).backward()
                    scaler.step(optimizer)
                    scaler.update()
            """, at=(5, 8)),
        Bad("""
            class Trainer:
                def train_step(self, x, y):
                    loss = self.criterion(self.model(x), y)
                    loss.backward()
                    self.optimizer.step()
                    return loss.item()
            """, at=(4, 8)),
        Bad("""
            for x, y in loader:
                # optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
            """, at=(2, 4)),
        Good("""
            class NativeScaler:
                def __call__(self, loss, optimizer):
                    self.scaler.scale(loss).backward()
                    self.scaler.step(optimizer)
                    self.scaler.update()
            """),
        Good("""
            class Trainer:
                def fit(self, loader):
                    for x, y in loader:
                        self.optimizer.zero_grad()
                        self.train_step(x, y)

                def train_step(self, x, y):
                    self.criterion(self.model(x), y).backward()
                    self.optimizer.step()
            """),
        Good("""
            for i, (x, y) in enumerate(loader):
                loss = criterion(model(x), y) / accum
                loss.backward()
                if (i + 1) % accum == 0:
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)
            """),
        Good("""
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                for p in model.parameters():
                    p.grad = None
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        if not f.steps:
            return
        text = f.text(f.node) if not isinstance(f.node, ast.Module) else ctx.code
        # the optimizers that no clearing in the text covers (NOTE [one optimizer never cleared])
        only: set[str] | None = None
        if MANUAL_ZERO_RE.search(text):
            only = uncleared_optimizers(f, text)
            if not only:
                return
        seen: set[int] = set()
        for s in f.steps:
            if only is not None and s.optimizer not in only:
                continue
            if self_managed(ctx, f.scope, s.optimizer, s.call.lineno):
                continue  # step reads no `.grad` or clears it (NOTE [step clears the gradients])
            loop = None if s.closure else step_loop(f, s)
            if loop is None:
                # a per-call step (NOTE [step functions])
                b = None if seen else per_call_step(f, s)
                if b is not None:
                    seen.add(id(f.node))
                    name = f.node.name  # type: ignore[attr-defined]
                    yield self._at_comment(f, s, f.node, self.report(b.call, ctx, related=(
                        related_at(ctx, s.call, "the step applies the summed gradients here"),
                        related_at(ctx, f.node, f"on every call of `{name}`")),
                        opt=s.optimizer, call=ctx.source(b.call), step_line=s.call.lineno,
                        where=f"on every call of `{name}`", units="calls"), ctx)
                continue
            if id(loop) in seen or fresh_each_pass(f, loop, s) \
                    or may_clear_elsewhere(f, loop, s) \
                    or unobserved_training(ctx, f.node, s.optimizer):  # NOTE [unobserved training]
                continue
            seen.add(id(loop))
            own = [b for b in f.backwards if b.accumulates and f.inside(b.stmt, loop)]
            b = next((b for b in own if f.before(b.stmt, s.stmt) and (only is None or not
                      for_another(f, b, s))), own[0])  # NOTE [two optimizers]
            found = self.report(b.call, ctx, related=(
                related_at(ctx, s.call, "the step applies the summed gradients here"),
                related_at(ctx, loop, "on every pass of this loop")), opt=s.optimizer,
                call=ctx.source(b.call), step_line=s.call.lineno,
                where="on every pass of this loop", units="batches")
            z = part_clearing(f, s) if only is not None else None
            if z is not None:  # `ae.encoder.zero_grad()`: the clearing names the wrong object
                yield moved_to_comment(found, ctx, z.stmt.lineno, (
                    f"`{ctx.source(z.call)}` clears only a part of what `{s.optimizer}` steps: "
                    f"the other parameters' gradients add up over the batches and "
                    f"`{s.optimizer}.step()` (line {s.call.lineno}) applies their sum; call "
                    f"`{s.optimizer}.zero_grad()` instead"))
                continue
            yield self._at_comment(f, s, loop, found, ctx)

    @staticmethod
    def _at_comment(f: LoopFacts, s: Step, block: ast.AST, found: Finding,
                    ctx: Context) -> Finding:
        """The finding moved to a commented-out `zero_grad()` of the same block, when there is
        one (NOTE [commented-out call]): that comment is the line to change."""
        hit = commented_out_call(ctx.lines, block.lineno,  # type: ignore[attr-defined]
                                 block_end(ctx.lines, block), "zero_grad")
        if hit is None:
            return found
        line, receiver = hit
        if receiver != s.optimizer and receiver in {t.optimizer for t in f.steps}:
            return found  # another optimizer's clearing, commented out: not this one
        head = found.message.split(" are never cleared", 1)[0]
        return moved_to_comment(found, ctx, line, (
            f"`{receiver}.zero_grad()` is commented out, so {head} are never cleared: "
            f"`{s.optimizer}.step()` (line {s.call.lineno}) applies the sum of all earlier "
            "gradients; restore the call"))


def moved_to_comment(found: Finding, ctx: Context, line: int, message: str) -> Finding:
    """``found`` reported on the commented-out call at ``line`` (NOTE [commented-out call]),
    its own place kept as the first related one."""
    text = ctx.lines[line - 1]
    return replace(found, line=line, column=len(text) - len(text.lstrip()), end_line=line,
                   end_column=len(text.rstrip()), message=message,
                   related=(Related(ctx.path, found.line, "gradients add up here",
                                    found.column),) + found.related)


class ZeroGradOutsideStepLoop(LoopRule):
    """`zero_grad()` runs once before (or outside) the loop in which `step()` runs.

    Why: gradients are cleared once, e.g. per epoch, but `backward()` and `step()` run per
    batch; from the second batch on, `.grad` holds the sum of all batches since the clear,
    so each step applies a growing, stale gradient. Gradient accumulation is fine: there
    the clear sits inside the same loop as the step (under the same `if`).
    Known limits: a step guarded by a "last batch" test (`if i == len(loader) - 1`, any `==`
    test without `%`) is assumed to run once per pass and is not reported, nor is a loop
    whose model and optimizer the function builds for itself and nothing reads (a memory
    benchmark: NOTE [unobserved training]).
    """

    code = "GT502"
    gate_statements = True
    name = "zero-grad-outside-step-loop"
    message = ("`{call}` clears the gradients once, outside the loop where `{opt}.step()` "
               "runs (line {step_line}); every later step applies the gradients of all batches "
               "since; move it into that loop")
    triggers = ("zero_grad",)
    function_needs = ("backward", "step", "zero_grad")
    examples = [
        Bad("""
            for epoch in range(10):
                optimizer.zero_grad()
                for x, y in loader:
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
            """, at=(2, 4)),
        Good("""
            for epoch in range(10):
                for x, y in loader:
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
            """),
        Good("""
            for batch in loader:
                optimizer.zero_grad()
                for micro in batch.split(4):
                    loss = criterion(model(micro), micro)
                    loss.backward()
                optimizer.step()
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        done: set[int] = set()
        for s in f.steps:
            loop = None if s.closure else step_loop(f, s)
            if loop is None or fresh_each_pass(f, loop, s) or _once_per_pass(f, s, loop):
                continue
            inner = f.between(f.zero_grads, loop.lineno, loop.end_lineno or loop.lineno)
            if any(covers(f, z, s) and f.inside(z.stmt, loop) for z in inner) or \
                    any(may_clear_model(f, z, s) and f.inside(z.stmt, loop)
                        for z in inner) or OTHER_ZERO_RE.search(f.text(loop)):
                continue
            before = [z for z in f.zero_grads if f.before(z.stmt, loop)]
            if not before or unobserved_training(ctx, f.node, s.optimizer):
                continue  # NOTE [unobserved training], asked last: its reading of the whole
                # function is the dearest test, and a loop with its clearing inside needs none
            before.sort(key=lambda z: (not covers(f, z, s), -z.call.lineno))  # nearest first
            for z in before[:1]:
                if id(z.call) not in done:
                    done.add(id(z.call))
                    yield self.report(z.call, ctx, related=(
                        related_at(ctx, s.call, "the optimizer steps here, once per batch"),),
                        call=ctx.source(z.call), opt=s.optimizer, step_line=s.call.lineno)


def _once_per_pass(f: LoopFacts, s: Step, loop: ast.stmt) -> bool:
    for stmt in f.within(loop):  # (not every statement of a long script, for each step)
        if isinstance(stmt, ast.If) and f.inside(s.stmt, stmt) and f.inside(stmt, loop):
            test = f.ctx.code_of(stmt.test)
            if ONCE_PER_PASS_RE.search(test) or ("==" in test and "%" not in test):
                return True  # `if i == n - 1:` runs once; `if (i + 1) % k == 0:` is periodic
    return False


class ZeroGradBetweenBackwardAndStep(LoopRule):
    """`zero_grad()` runs after `backward()` and before `step()`, erasing the gradients.

    Why: with the default `set_to_none=True` every `.grad` becomes None and `step()` skips
    those parameters: the update is exactly zero (pytorch-facts.md#zero-grad-order: backward →
    zero_grad →
    step changes the weights by 0.0000); with `set_to_none=False` the step sees zeros, so only
    momentum and weight decay move the weights. Clearing *before* `backward()` (even after the
    forward) or *after* `step()` is correct.
    Known limits: `model.zero_grad()` counts only when the optimizer was built from
    `model.parameters()` in this file, or when the function steps one optimizer and clears one
    module named like `model` / `net`; a clear under an `if` (skipping a bad batch) is not
    reported, nor one followed, before the step, by gradients written by hand (`p.grad = g`).
    The step may run one call away, in a method of the class or a function of the file whose
    body steps the optimizer unconditionally and neither backpropagates nor writes `.grad`
    itself (NOTE [step one call away]).
    """

    code = "GT503"
    gate_statements = True
    name = "zero-grad-between-backward-and-step"
    message = ("`{call}` erases the gradients that `backward()` just computed (line "
               "{backward_line}) before `{opt}.step()` (line {step_line}) uses them: the step "
               "{effect}; clear the gradients before `backward()` or after `step()`")
    triggers = ("zero_grad",)
    function_needs = ("backward", "zero_grad")  # the step may be one call away
    examples = [
        Bad("""
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.zero_grad()
                optimizer.step()
            """, at=(4, 4)),
        Bad("""
            class Learner:
                def update(self, loss):
                    loss.backward()
                    self.opt.zero_grad()
                    self.apply()

                def apply(self):
                    self.opt.step()
            """, at=(4, 8)),
        Good("""
            for x, y in loader:
                out = model(x)
                optimizer.zero_grad()
                loss = criterion(out, y)
                loss.backward()
                optimizer.step()
            """),
        Good("""
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                if not torch.isfinite(loss):
                    optimizer.zero_grad()
                optimizer.step()
            """),
        Good("""
            errD.backward()
            netG.zero_grad()
            optimizerD.step()
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        acc = [b for b in f.backwards if b.accumulates]
        by_line = sorted(f.steps, key=lambda t: t.stmt.lineno)  # for _applied
        lines = [t.stmt.lineno for t in by_line]
        for z in f.zero_grads:
            end = f.block_end(z.stmt)  # a step it dominates lies after it in its block
            for s in [*f.between(f.steps, z.stmt.lineno, end),
                      *_called_steps(f, ctx, z, end)] if end is not None else ():
                if not (covers(f, z, s) and f.dominates(z.stmt, s.stmt)) or part_of(f, z, s):
                    continue
                floor = _applied_floor(f, z, s, by_line, lines)  # (lines: see _applied)
                b = next((b for b in f.between(acc, floor, z.stmt.lineno)
                          if f.before(b.stmt, z.stmt)  # NOTE [two optimizers]
                          and not _applied(f, b, z, s, by_line, lines)  # (pure, cheaper:
                          and not for_another(f, b, s)), None)  # asked first)
                if b is None or any(f.before(z.stmt, b2.stmt) and f.before(b2.stmt, s.stmt)
                                    for b2 in f.between(acc, z.stmt.lineno, s.stmt.lineno)) \
                        or _grads_written(f, z, s):
                    continue
                yield self.report(z.call, ctx, related=(
                    related_at(ctx, b.call, "gradients computed here"),
                    related_at(ctx, s.call, "step applies the (now empty) gradients here")),
                    call=ctx.source(z.call), opt=s.optimizer, backward_line=b.call.lineno,
                    step_line=s.call.lineno, effect=_effect(z.call))
                break


def _called_steps(f: LoopFacts, ctx: Context, z: Named, end: int) -> list[Step]:
    """The calls after ``z`` (to line ``end``) of a function of the file or a method of the
    class (``self.step()``) that steps an optimizer in its own body, unconditionally, after
    no backward or gradient write of its own: for the caller, a step of that optimizer
    (spelled with the caller's names) at the call (NOTE [step one call away])."""
    out: list[Step] = []
    for st in f.stmts_between(z.stmt.lineno, end):
        if st is z.stmt:
            continue
        for call in calls_in(st):
            got = resolve(ctx, f.node, call) if isinstance(call.func, (ast.Name, ast.Attribute)) \
                and not f.ctx.code_of(call.func).endswith(("zero_grad", "backward")) else None
            if got is None:
                continue
            fn, names = got
            inner = step_calls(ctx, fn)
            if inner.backwards or any(isinstance(n, ast.Assign) and any(
                    isinstance(t, ast.Attribute) and t.attr == "grad" for t in n.targets)
                    for n in walk(fn)):
                continue
            for t in inner.steps:
                head, dot, rest = t.optimizer.partition(".")
                if t.closure or t.stmt not in fn.body or head not in names:
                    continue
                out.append(Step(call, st, names[head] + dot + rest, False))
    return out


# NOTE [step one call away]: the step a clearing erases may run in a helper: pytorch-rl-il's
# `reinforce` runs `loss.backward()`, `self._optimizer.zero_grad()`, then `self.step()`,
# whose body clips and calls `self._optimizer.step()`. Only a top-level step of the callee
# counts (one under an `if` may not run), and not in a callee that backpropagates or writes
# `.grad` itself (an update helper computes the gradients it applies).


def _grads_written(f: LoopFacts, z: Named, s: Step) -> bool:
    """A statement that runs after ``z`` and before ``s`` assigns a gradient by hand
    (``p.grad = g``, a value other than None): the step applies the gradients written after
    the clear, not the erased ones (pFedHN's hypernetwork: `optimizer.zero_grad()`, then
    `torch.autograd.grad(...)` written into each `p.grad` before `optimizer.step()`)."""
    for st in f.stmts_between(z.stmt.lineno + 1, s.stmt.lineno - 1):
        if isinstance(st, ast.Assign) \
                and any(isinstance(t, ast.Attribute) and t.attr == "grad" for t in st.targets) \
                and not (isinstance(st.value, ast.Constant) and st.value.value is None) \
                and f.before(z.stmt, st) and f.before(st, s.stmt):
            return True
    return False


def _applied(f: LoopFacts, b: Backward, z: Named, s: Step, by_line: list[Step],
             lines: list[int]) -> bool:
    """A step of ``s``'s optimizer runs after ``b`` and before ``z``: the gradients ``z``
    clears were already applied (a first training loop, then a second one whose backward runs
    in a helper). Only steps on ``b``'s to ``z``'s line are asked (``f.before(x, y)``: ``x``
    starts on or before ``y``'s line): a scan of all steps per backward was cubic in a script's
    loops."""
    for i in range(bisect.bisect_left(lines, b.stmt.lineno),
                   bisect.bisect_right(lines, z.stmt.lineno)):
        t = by_line[i]  # (no slice: most backwards stop at the first step after them)
        if t is not s and t.optimizer == s.optimizer and f.before(b.stmt, t.stmt) and \
                f.before(t.stmt, z.stmt):
            return True
    return False


def _applied_floor(f: LoopFacts, z: Named, s: Step, by_line: list[Step],
                   lines: list[int]) -> int:
    """A line such that every backward ``b`` on an earlier line that runs before ``z`` is
    :func:`_applied` (0: none known), so GT503 asks only the backwards from it on: in a script
    of many training loops each ``zero_grad`` otherwise rejects every earlier loop's backward
    one by one.

    Take the nearest step ``t`` of ``s``'s optimizer (not ``s``) on or before ``z``'s line; if
    ``before(t, z)``, let ``A`` be ``t``'s enclosing statement in the block where the paths of
    ``t`` and ``z`` part (NOTE [statement order]). A backward ``b`` with ``before(b, z)`` on a
    line before ``A`` sits in an earlier statement of that block or of a block enclosing it:
    its paths to ``t`` and to ``z`` part at the same place, the jumps between them are a part
    of those between ``b`` and ``z`` (none), and ``b``'s own blocks are the same; so
    ``before(b, t)``, and ``t`` runs before ``z``: ``b`` is applied."""
    for i in range(bisect.bisect_right(lines, z.stmt.lineno) - 1, -1, -1):
        t = by_line[i]
        if t is s or t.optimizer != s.optimizer:
            continue
        if not f.before(t.stmt, z.stmt):
            return 0
        pt, pz = f.paths[id(t.stmt)], f.paths[id(z.stmt)]
        k = 0
        while pt[k] == pz[k]:
            k += 1
        pid, field, at = pt[k]
        return f.blocks[(pid, field)][at].lineno
    return 0


def _effect(call: ast.Call) -> str:
    """What step() does after this zero_grad call (set_to_none defaults to True)."""
    for kw in call.keywords:
        if kw.arg == "set_to_none" and not (isinstance(kw.value, ast.Constant)
                                            and kw.value.value is True):
            return ("sees all-zero gradients (only momentum and weight decay still move the "
                    "weights)")
    if call.args and not (isinstance(call.args[0], ast.Constant) and call.args[0].value is True):
        return "sees all-zero gradients (only momentum and weight decay still move the weights)"
    return "skips every parameter, since their `.grad` is now None"
