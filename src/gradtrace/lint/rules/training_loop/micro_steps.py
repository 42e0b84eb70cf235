"""GT512-GT513: gradient accumulation, a step every few passes of the loop.

# NOTE [periodic step]
A step under an ``if`` whose test takes a remainder (``if (i + 1) % accum == 0:``, or a name
bound to such a test in the function) runs once every few passes: the passes in between only
add their micro-batch's gradient into ``.grad``. Two things then break the accumulation: a
``zero_grad()`` that still runs on every pass before the backward (each step applies the last
micro-batch alone, GT512), and a loss that is not divided by the number of passes (each step
applies the sum, that many times the mean gradient, GT513). A step whose own ``if`` also holds
a backward before it applies that pass's gradient: nothing accumulates for it.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.rules.training_loop._accumulate_blocks import accumulation_clears
from gradtrace.lint.rules.training_loop._epoch_clears import epoch_clears
from gradtrace.lint.rules.training_loop._base import BACKWARD_CALLS, LoopRule, related_at
from gradtrace.lint.rules.training_loop._loop import Backward, LoopFacts, Step
from gradtrace.lint.rules.training_loop._loss_scaling import (
    _plain_backward, _scaled_by, _scaled_loss, scale_free)
from gradtrace.lint.rules.training_loop.zero_grad import covers, fresh_each_pass, step_loop
from gradtrace.lint.rules.training_loop._periods import (  # noqa: F401 (conditional,
    _period_one, _remainders, conditional, counted, guard_remainders, micro_step_loops,
    most_passes, skip_guard)  # re-exported)


def periodic_guard(f: LoopFacts, stmt: ast.stmt, loop: ast.stmt
                   ) -> tuple[ast.If, list[ast.BinOp]] | None:
    """The ``if`` inside ``loop`` around ``stmt`` whose test is periodic, with its remainder
    operations (NOTE [periodic step])."""
    for s in f.within(loop):
        if not (isinstance(s, ast.If) and s is not stmt and f.inside(stmt, s)
                and f.inside(s, loop) and s is not loop):
            continue
        mods = guard_remainders(f, s, loop)
        if mods and not all(_period_one(f, m) for m in mods):
            return s, mods
        if not mods and counted(f, s, loop):
            return s, []
    return None


def periodic_steps(f: LoopFacts) -> Iterator[tuple[Step, ast.stmt, ast.If, list[ast.BinOp]]]:
    for s in f.steps:
        loop = None if s.closure else step_loop(f, s)
        if loop is None or fresh_each_pass(f, loop, s):
            continue
        guard = periodic_guard(f, s.stmt, loop)
        # a step skipped now and then is no accumulation: NOTE [all but every n-th pass]
        if guard and not _own_backward(f, guard[0], s) and not most_passes(f, guard[0], loop):
            yield s, loop, guard[0], guard[1]


def _pass_function_steps(f: LoopFacts) -> Iterator[tuple[Step, ast.If]]:
    """# NOTE [pass function]
    A function with no loop around its step, whose step sits under an ``if`` taking a
    remainder of one of the function's parameters (``def training_step(self, batch, i): ...
    if (i + 1) % accum == 0: opt.step()``): each call is one pass of the caller's loop, so the
    function's body is that loop's body (NOTE [periodic step]). The test may read a name bound
    to the remainder in the function, and the remainder a ``self.<attr>`` that a method of the
    class adds 1 to (speechbrain's ``should_step = self.step % accum == 0``, ``self.step += 1``
    in ``fit``); a clear under an ``if`` that also holds the step's ``if`` (a configuration
    branch, ``if self.auto_mix_prec:``) still runs on every pass."""
    node = f.node
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return
    params = {a.arg for a in node.args.args + node.args.kwonlyargs}
    counters = _self_counters(f) if params & {"self"} else frozenset()
    for s in f.steps:
        if s.closure or f.loops_of(s.stmt):
            continue
        for x in f.scope.stmts:
            if isinstance(x, ast.If) and f.inside(s.stmt, x) and any(
                    isinstance(n, ast.Name) and n.id in params and n.id != "self"
                    or dotted(n) in counters
                    for m in _step_count_remainders(f, x) for n in walk(m.left)):
                if not _own_backward(f, x, s):
                    yield s, x
                break


def _step_count_remainders(f: LoopFacts, x: ast.If) -> list[ast.BinOp]:
    """The remainders of ``x``'s test, or of the test a name in it is bound to in the
    function (``should_step = self.step % accum == 0`` then ``if should_step:``)."""
    mods = _remainders(x.test)
    if mods:
        return mods
    for n in walk(x.test):
        if isinstance(n, ast.Name):
            b = f.scope.binding_before(n.id, x.lineno)
            if b is not None and b.value is not None and not f.loops_of(b.stmt):
                mods += _remainders(b.value)
    return mods


def _self_counters(f: LoopFacts) -> frozenset[str]:
    """``self.<attr>`` that a method of the function's class increments (``self.step += 1``
    in speechbrain's ``Brain.fit``, once per call of ``fit_batch``): a count of passes."""
    cls = f.ctx.analysis.class_of(f.node)
    if cls is None:
        return frozenset()
    return frozenset(d for n in walk(cls.node) if isinstance(n, ast.AugAssign)
                     and isinstance(n.op, ast.Add) and isinstance(n.value, ast.Constant)
                     and n.value.value == 1 and (d := dotted(n.target)) is not None
                     and d.startswith("self.") and d.count(".") == 1)


def _own_backward(f: LoopFacts, guard: ast.If, s: Step) -> bool:
    """A backward under the step's own ``if``, before the step: the step applies that pass's
    gradient, not an accumulation (a GAN's generator trained every few critic steps, whose
    every-pass backward is the critic's)."""
    return any(b.accumulates and f.inside(b.stmt, guard) and f.before(b.stmt, s.stmt)
               for b in f.backwards)


def _every_pass(f: LoopFacts, loop: ast.stmt, guard: ast.If) -> list[Backward]:
    """The accumulating backward passes of ``loop`` that run on every pass (not under the
    step's guard)."""
    return [b for b in f.backwards if b.accumulates and f.inside(b.stmt, loop)
            and not f.inside(b.stmt, guard)]


class ZeroGradEveryAccumulationStep(LoopRule):
    """Gradient accumulation whose `zero_grad()` still runs on every pass.

    Why: the step runs every N passes (`if (i + 1) % N == 0: optimizer.step()`) so that the N
    micro-batches' gradients add up in `.grad`; a `zero_grad()` on every pass before the
    backward (or after the step's `if`, on the passes that skip it) erases them, and each step
    applies the last micro-batch's gradient alone (an N times smaller effective batch, and
    N - 1 micro-batches wasted). Clear right after the step, under the same `if`.
    The same holds for a counted step (`if seen >= budget: opt.step(); seen = 0`,
    NOTE [counted step]).
    A step after `if i % N != 0: continue` runs every N passes the same way
    (NOTE [skipped passes]); so does a step in `with accelerator.accumulate(model):`, whose
    wrapped optimizer clears and steps on a window's last micro-step only: a clear first in
    that block wipes the window's other micro-batches (NOTE [accumulation context]). A clear
    at the top of the epoch loop, when the window's count is carried across epochs (bound
    before that loop, moved only by the step's `if`; the step may be a method of the class
    that steps and clears), erases the micro-batches of the window open at each epoch's end
    (NOTE [window across epochs]).
    Known limits: the step's `if` must take a remainder (`%`) in its test, directly or through
    a name bound to such a test in the same function, or compare a count that the loop grows
    (or measures from a value bound each pass) and the `if` resets; it holds no backward of
    its own.
    """

    code = "GT512"
    gate_statements = True
    name = "zero-grad-every-accumulation-step"
    message = "{detail}"
    every = ("`{call}` clears the gradients on every pass, but `{opt}.step()` (line "
             "{step_line}) runs only every few passes (`{test}`): the micro-batches' "
             "gradients are erased before they add up and each step applies the last one's "
             "alone; clear them right after the step, under that `if`")
    epoch = ("`{call}` clears the gradients at the start of every pass of this loop, but the "
             "accumulation window of `{opt}`'s step (line {step_line}, `{test}`) is counted "
             "across its passes: the micro-batches a window holds at the end of a pass are "
             "erased before the step that should apply them; clear once, before this loop")
    triggers = ("zero_grad",)
    function_needs = ("backward", "step", "zero_grad")
    examples = [
        Bad("""
            for i, (x, y) in enumerate(loader):
                optimizer.zero_grad()
                loss = criterion(model(x), y) / accum
                loss.backward()
                if (i + 1) % accum == 0:
                    optimizer.step()
            """, at=(2, 4)),
        Bad("""
            seen = 0
            for x, y in loader:
                optimizer.zero_grad()
                criterion(model(x), y).backward()
                seen += len(x)
                if seen >= budget:
                    optimizer.step()
                    seen = 0
            """, at=(3, 4)),
        Good("""
            seen = 0
            for x, y in loader:
                criterion(model(x), y).backward()
                seen += len(x)
                if seen >= budget:
                    optimizer.step()
                    optimizer.zero_grad()
                    seen = 0
            """),
        Good("""
            for i, (x, y) in enumerate(loader):
                loss = criterion(model(x), y) / accum
                loss.backward()
                if (i + 1) % accum == 0:
                    optimizer.step()
                    optimizer.zero_grad()
            """),
        Good("""
            for i, (x, y) in enumerate(loader):
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                if torch.isfinite(loss):
                    optimizer.step()
            """),
        Bad("""
            for i, (x, y) in enumerate(loader):
                optimizer.zero_grad()
                (criterion(model(x), y) / accum).backward()
                if (i + 1) % accum != 0:
                    continue
                optimizer.step()
            """, at=(2, 4)),
        Good("""
            for i, (x, y) in enumerate(loader):
                (criterion(model(x), y) / accum).backward()
                if (i + 1) % accum != 0:
                    continue
                optimizer.step()
                optimizer.zero_grad()
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        found: dict[int, list] = {}  # one finding per step guard, the first clear leading
        periodic = list(periodic_steps(f))
        for s, loop, guard, _mods in periodic:
            backs = _every_pass(f, loop, guard)
            for z in f.zero_grads:
                if not covers(f, z, s) or not f.inside(z.stmt, loop) \
                        or f.inside(z.stmt, guard) or conditional(f, z.stmt, loop):
                    continue
                b = next((b for b in backs if f.before(z.stmt, b.stmt)), None)
                if b is None and f.before(guard, z.stmt):  # cleared after the step's `if`
                    b = next((b for b in backs if f.before(b.stmt, guard)), None)
                if b is not None:
                    found.setdefault(id(guard), []).append((z, s, b, guard))
                    break
        for s in f.steps:  # NOTE [skipped passes]: the step after `if i % n: continue`
            loop = None if s.closure else step_loop(f, s)
            skip = skip_guard(f, s, loop) if loop is not None \
                and not fresh_each_pass(f, loop, s) else None
            if skip is None or id(skip) in found:
                continue
            backs = [b for b in _every_pass(f, loop, skip) if f.before(b.stmt, skip)]
            for z in f.zero_grads:
                b = next((b for b in backs if f.before(z.stmt, b.stmt)), None)
                if b is not None and covers(f, z, s) and f.inside(z.stmt, loop) \
                        and not conditional(f, z.stmt, loop):
                    found.setdefault(id(skip), []).append((z, s, b, skip))
                    break
        for s, guard in _pass_function_steps(f):  # NOTE [pass function]
            backs = [b for b in f.backwards if b.accumulates and not f.loops_of(b.stmt)
                     and not f.inside(b.stmt, guard)]
            for z in f.zero_grads:
                if f.loops_of(z.stmt) or not covers(f, z, s) or f.inside(z.stmt, guard) \
                        or any(
                        isinstance(x, (ast.If, ast.Try)) and x is not z.stmt
                        and f.inside(z.stmt, x) and (x is guard or not f.inside(guard, x))
                        for x in f.scope.stmts):
                    continue  # (an `if` around the clear, the backward and the step's own
                    # `if` is a configuration branch: speechbrain's `if self.auto_mix_prec:`)
                if f.scope.exclusive(z.stmt, s.stmt):
                    continue
                b = next((b for b in backs if f.before(z.stmt, b.stmt)
                          and not f.scope.exclusive(z.stmt, b.stmt)), None)
                if b is not None:
                    found.setdefault(id(guard), []).append((z, s, b, guard))
                    break
        for z, s, b, w in accumulation_clears(f):  # NOTE [accumulation context]
            found.setdefault(id(w), []).append((z, s, b, w))
        across: set[int] = set()
        for z, s, b, g in epoch_clears(f, periodic, periodic_guard) if not found else ():
            found.setdefault(id(g), []).append((z, s, b, g))  # NOTE [window across epochs]
            across.add(id(g))
        for hits in found.values():
            hits.sort(key=lambda h: (h[0].call.lineno, h[0].call.col_offset))
            z, s, b, guard = hits[0]
            others = tuple(related_at(ctx, h[0].call, "this one clears on every pass too")
                           for h in hits[1:] if h[0].call is not z.call)
            yield self.report(z.call, ctx, related=(
                related_at(ctx, s.call, "the step runs only every few passes here"),
                related_at(ctx, b.call, "each micro-batch's gradient is added here"), *others),
                detail=(self.epoch if id(guard) in across else self.every).format(
                    call=ctx.source(z.call), opt=s.optimizer, step_line=s.call.lineno,
                    test=ctx.source(guard.items[0].context_expr) if isinstance(
                        guard, (ast.With, ast.AsyncWith)) else ctx.source(guard.test)
                    if f.inside(s.stmt, guard) else f"if {ctx.source(guard.test)}: continue"))


class AccumulatedLossNotScaled(LoopRule):
    """Gradient accumulation whose loss is not divided by the number of micro-batches.

    Why: `backward()` adds each micro-batch's gradient into `.grad`, and the step every N
    passes applies their *sum*: N times the mean gradient, as if the learning rate were N
    times larger (SGD and momentum). Divide the loss by N before `backward()`. Not said when
    the step's optimizer is built in the code as one that divides each gradient by a root of
    its own square (Adam, AdamW, RMSprop...: the sum moves the weights as the mean would),
    unless a coupled `weight_decay` or a clip reads the gradient's size
    (NOTE [scale-free update]).
    A loop of micro-steps (`for _ in range(accum): ... loss.backward()`, then the step and
    the clear after it: NOTE [micro-step loop]) sums the same way.
    Known limits: said only when the step's `if` takes a remainder (or the step follows a
    loop of micro-steps `range(<name>)` whose loss does not read its variable), the clearing
    is periodic too, the backward is `loss.backward()` (or through a `GradScaler`;
    `accelerator.backward` and engines scale the loss themselves), and neither the loss nor anything it is computed
    from in the loop is divided or multiplied, nor is the remainder's divisor used in any
    division, multiplication or call of the function (of the class, for a `self.` divisor).
    """

    code = "GT513"
    gate_statements = True
    name = "accumulated-loss-not-scaled"
    message = ("`{call}` adds each micro-batch's gradient into `.grad` and `{opt}.step()` "
               "(line {step_line}) applies their sum every `{n}` passes, but the loss is not "
               "divided by `{n}`: each step uses `{n}` times the mean gradient; backward "
               "`{loss} / {n}` instead")
    triggers = BACKWARD_CALLS
    function_needs = ("backward", "step", "zero_grad")
    examples = [
        Bad("""
            for i, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                if (i + 1) % accum_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
            """, at=(3, 4)),
        Bad("""
            for it in range(max_iters):
                for micro in range(accum_steps):
                    x, y = get_batch()
                    loss = criterion(model(x), y)
                    loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            """, at=(5, 8)),
        Good("""
            for it in range(max_iters):
                for micro in range(accum_steps):
                    x, y = get_batch()
                    loss = criterion(model(x), y) / accum_steps
                    loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            """),
        Good("""
            for i, (x, y) in enumerate(loader):
                loss = criterion(model(x), y) / accum_steps
                loss.backward()
                if (i + 1) % accum_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
            """),
        Good("""
            import torch

            class Trainer:
                def __init__(self, model, accum):
                    self.model, self.accum = model, accum
                    self.opt = torch.optim.SGD(model.parameters(), lr=0.1)

                def loss_of(self, batch):
                    return self.model(batch).mean() / self.accum

                def epoch(self, loader):
                    for i, batch in enumerate(loader):
                        loss = self.loss_of(batch)
                        loss.backward()
                        if (i + 1) % self.accum == 0:
                            self.opt.step()
                            self.opt.zero_grad()
            """),
        Good("""
            for i, batch in enumerate(loader):
                loss = model(batch).loss
                accelerator.backward(loss)
                if (i + 1) % accum_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        told: set[int] = set()  # one per guard (`scaler.step(opt)` else `opt.step()` in it)
        for s, loop, guard, n in self._accumulations(f, ctx):
            if scale_free(f, s):
                continue
            for b in _every_pass(f, loop, guard):
                if _plain_backward(b) and not _scaled_loss(f, b, loop) and (
                        guard is _NO_GUARD or id(guard) not in told):
                    told.add(id(guard))
                    yield self.report(b.call, ctx, related=(
                        related_at(ctx, s.call, f"the step runs every `{n}` passes here"),),
                        call=ctx.source(b.call), opt=s.optimizer, step_line=s.call.lineno,
                        n=n, loss=ctx.source(b.loss))  # type: ignore[arg-type]
                    break

    @staticmethod
    def _accumulations(f: LoopFacts, ctx: Context
                       ) -> Iterator[tuple[Step, ast.stmt, ast.stmt, str]]:
        """(step, loop of the micro-batches, the step's guard (the loop itself for a loop of
        micro-steps), number of micro-batches) of each accumulation whose clear is periodic
        and whose count scales nothing in the function."""
        for s, loop, guard, mods in periodic_steps(f):
            if not any(covers(f, z, s) and f.inside(z.stmt, loop) and (
                    f.inside(z.stmt, guard) or periodic_guard(f, z.stmt, loop) is not None)
                    for z in f.zero_grads):
                continue  # no clear, or one on every pass (GT501 / GT512 say it)
            if any(covers(f, z, s) and f.inside(z.stmt, loop) and not f.inside(z.stmt, guard)
                   and not conditional(f, z.stmt, loop) for z in f.zero_grads):
                continue  # cleared on every pass as well: no gradients add up (GT512 says it)
            divisors = {dotted(m.right) for m in mods}
            if None in divisors or len(divisors) != 1 or _scaled_by(f, divisors, ctx):
                continue
            yield s, loop, guard, divisors.pop()  # type: ignore[misc]
        for s, inner, count in micro_step_loops(f):
            if not _scaled_by(f, {count}, ctx, inner.iter):  # type: ignore[attr-defined]
                yield s, inner, _NO_GUARD, count


_NO_GUARD = ast.Pass()  # no statement of a function is inside it


class ClipEveryAccumulationPass(LoopRule):
    """Gradients are clipped on every pass of a gradient-accumulation loop, while `step()`
    runs only every few passes.

    Why: between two steps `.grad` holds the running sum of the micro-batches' gradients.
    A `clip_grad_norm_` on every pass rescales that partial sum each time it exceeds the
    bound: the earlier micro-batches are shrunk again and again, the later ones less, and
    the step applies neither the clipped full gradient nor the plain sum (the norm it clips
    is that of a partial sum; huggingface/transformers#1563). Clip once, inside the
    accumulation branch, right before `optimizer.step()` (NOTE [periodic step]).
    Known limits: the step must sit under an `if` that takes a remainder (or a name bound to
    one) in the same loop as the clip; a clip with an infinite bound (measuring the norm) is
    not reported.
    """

    code = "GT532"
    gate_statements = True
    name = "clip-every-accumulation-pass"
    message = ("`{call}` runs on every pass, but `{opt}.step()` (line {step_line}) only under "
               "`if {guard}`: each clip rescales the partial sum of the micro-batch "
               "gradients accumulated so far; clip once, inside that branch, before the step")
    triggers = ("clip_grad",)
    function_needs = ("step", "clip_grad")
    examples = [
        Bad("""
            import torch
            for i, (x, y) in enumerate(loader):
                (criterion(model(x), y) / 4).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                if (i + 1) % 4 == 0:
                    optimizer.step()
                    optimizer.zero_grad()
            """, at=(4, 4)),
        Good("""
            import torch
            for i, (x, y) in enumerate(loader):
                (criterion(model(x), y) / 4).backward()
                if (i + 1) % 4 == 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                    optimizer.zero_grad()
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        for s, loop, guard, _ in periodic_steps(f):
            for c in f.clips:
                src = ctx.source(c.call)
                if not f.inside(c.stmt, loop) or f.inside(c.stmt, guard) or "inf" in src \
                        or conditional(f, c.stmt, loop) or not any(
                            f.before(b.stmt, c.stmt) for b in _every_pass(f, loop, guard)):
                    continue
                yield self.report(c.call, ctx, related=(
                    related_at(ctx, s.call, "the optimizer steps here, every few passes"),),
                    call=ctx.source(c.call.func), opt=s.optimizer, step_line=s.call.lineno,
                    guard=ctx.source(guard.test))
                return
