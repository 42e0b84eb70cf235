"""GT518-GT519 (GT522 in :mod:`.step_early`): the optimizer step sits where it misses the gradients it should apply.

# NOTE [step level]
Two shapes say by their code alone which gradients a step applies. A ``zero_grad()`` that runs
on every pass of a loop, before that pass's ``backward()``, with the step after that loop (one
level up): every pass erases the previous pass's gradient, so the step applies the last
batch's alone (GT518). A loss divided by ``N`` next to an ``if ... % N == 0:`` branch in the
same loop marks a gradient accumulation over ``N`` passes; a step of that loop outside the
branch (and under no other remainder test) runs on every pass, applying one ``1/N``-scaled
micro-batch each time (GT519).
"""
from __future__ import annotations

import ast
import bisect
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.rules.training_loop._base import LoopRule, related_at
from gradtrace.lint.rules.training_loop._clear_calls import clearing_calls
from gradtrace.lint.rules.training_loop._clear_facts import covers as clears
from gradtrace.lint.analysis.graph_deps import graphs
from gradtrace.lint.rules.training_loop._loop import Backward, LoopFacts, Step
from gradtrace.lint.rules.training_loop._other_phase import gathered, other_phase
from gradtrace.lint.rules.training_loop.micro_steps import (
    conditional, _period_one, _remainders, periodic_guard,
)
from gradtrace.lint.rules.training_loop.zero_grad import covers, step_loop


class StepOutsideBackwardLoop(LoopRule):
    """`zero_grad()` and `backward()` run on every pass of a loop, but `step()` only after it.

    Why: each pass clears the gradients, then adds its batch's; the step after the loop (at
    the epoch level) applies whatever the last pass left: the last batch's gradient alone,
    once per epoch, and every other batch is computed for nothing (a few steps instead of
    one per batch). Step inside the loop, after `backward()`; to accumulate over the loop,
    clear once before it. The same holds one call away: a method that clears `self.<opt>`
    and runs its backward, called on every pass, and a method stepping it called once after
    the loop (an RL trainer's `forward_backward` per micro-batch, then `optim_step`): the clear
    in the method is reported (NOTE [clearing method per pass]).
    Known limits: the clear must run unconditionally on every pass before the backward, and
    the loop must hold no step of that optimizer.
    """

    code = "GT518"
    gate_statements = True
    name = "step-outside-backward-loop"
    message = ("{lead} runs once after the loop of line {loop_line}, whose every pass "
               "clears the gradients (`{clear}`, line {clear_line}) before its "
               "`backward()`: the step applies only the last batch's gradient; {advice}")
    triggers = ("zero_grad",)
    function_needs = ("backward", "step", "zero_grad")
    examples = [
        Bad("""
            def train(model, loader, optimizer, epochs):
                for epoch in range(epochs):
                    for x, y in loader:
                        optimizer.zero_grad()
                        loss = F.cross_entropy(model(x), y)
                        loss.backward()
                    optimizer.step()
            """, at=(7, 8)),
        Good("""
            def train(model, loader, optimizer, epochs):
                for epoch in range(epochs):
                    optimizer.zero_grad()
                    for x, y in loader:
                        loss = F.cross_entropy(model(x), y) / len(loader)
                        loss.backward()
                    optimizer.step()
            """),
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        yield from super().visit_FunctionDef(node, ctx)
        if ctx.mentions("zero_grad") and ".backward(" in ctx.code_of(node):
            yield from self._through_calls(node, ctx)

    def _through_calls(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        """NOTE [clearing method per pass]: the clear sits in a method the loop calls."""
        for z, call, loop, step in clearing_calls(node, ctx):
            yield self.report(z.call, ctx, related=(
                related_at(ctx, call, f"`{node.name}` runs on every pass of this loop"),
                related_at(ctx, step, "the step after the loop applies what is left")),
                lead=f"`{ctx.source(step)}` (line {step.lineno})", loop_line=loop.lineno,
                clear=ctx.source(z.call), clear_line=z.call.lineno,
                advice=f"clear once before the loop or after the step, not on every call of "
                       f"`{node.name}`")
            return

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        # (NOTE [step level]) the zero_grad's loop, and the first step after it one level up
        groups: dict[int, list[tuple[int, Step]]] | None = None
        done: set[int] = set()
        for z in f.zero_grads:
            loops = f.loops_of(z.stmt)
            if not loops:
                continue
            loop = loops[-1]
            if groups is None:  # the steps by their innermost loop, once per function
                groups = {}
                for st in f.steps:
                    inner = f.loops_of(st.stmt)
                    groups.setdefault(id(inner[-1]) if inner else 0, []).append(
                        (st.call.lineno, st))
            # the first step after the loop, one loop level up (not a per-pair scan: a
            # script's module body holds hundreds of loops)
            level = groups.get(id(loops[-2]) if len(loops) > 1 else 0, [])
            k = bisect.bisect_right(level, (loop.end_lineno or loop.lineno, 1 << 30),
                                    key=lambda t: (t[0], 1 << 30))
            if k == len(level):
                continue
            s = level[k][1]
            if s.closure or id(s.call) in done or not f.before(loop, s.stmt) or \
                    not covers(f, z, s) or conditional(f, z.stmt, loop) or not any(
                        b.accumulates and f.inside(b.stmt, loop) and f.before(z.stmt, b.stmt)
                        for b in f.backwards) or any(
                        s2.optimizer == s.optimizer and f.inside(s2.stmt, loop)
                        for s2 in f.steps) or _own_pass(f, loop, s) or _retried(f, loop) or \
                    _grads_written(f, loop, s) or other_phase(f, loop, s) or gathered(f, loop, s):
                continue
            done.add(id(s.call))
            fields = dict(loop_line=loop.lineno, clear=ctx.source(z.call),
                          clear_line=z.call.lineno)
            n = _accumulated_over(f, loop)
            if n is not None:  # the loss is divided by the loop's count: an accumulation
                yield self.report(z.call, ctx, related=(related_at(
                    ctx, s.call, "the step after the loop applies what is left"),), **fields,
                    lead=f"this clear sits inside an accumulation over `{n}` passes (the loss "
                         f"is divided by `{n}`); `{ctx.source(s.call)}`",
                    advice="clear once before the loop (or after the step), not on every pass")
                continue
            yield self.report(s.call, ctx, related=(
                related_at(ctx, z.call, "cleared on every pass of the loop here"),),
                lead=f"`{ctx.source(s.call)}`", **fields,
                advice="step inside that loop, after `backward()`")


def _retried(f: LoopFacts, loop: ast.stmt) -> bool:
    """Every backward of ``loop`` is followed, in its pass, by a ``break`` of the loop (in
    the same block or an enclosing one, or in the ``else:`` of the ``try`` it sits in): a
    pass that gets past its backward ends the loop, so the loop repeats only after a pass
    that raised (caught inside) and the step applies the one pass that finished: a retry
    (tabular-dl-revisiting-models halves the chunk size on an out-of-memory error)."""
    inner = [b for b in f.backwards if f.inside(b.stmt, loop)]
    return bool(inner) and all(_breaks_after(loop.body, b.stmt) for b in inner)


def _breaks_after(block: list[ast.stmt], target: ast.stmt) -> bool:
    for i, st in enumerate(block):
        if st is target:
            return _breaks(block[i + 1:])
        if isinstance(st, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef,
                           ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue  # a `break` there ends that inner loop, not this one
        subs = [getattr(st, k) for k in ("body", "orelse", "finalbody")
                if isinstance(getattr(st, k, None), list)]
        subs += [h.body for h in getattr(st, "handlers", ())]
        subs += [c.body for c in getattr(st, "cases", ())]
        for sub in subs:
            if not any(n is target for n in walk(ast.Module(body=sub, type_ignores=[]))):
                continue
            if _breaks_after(sub, target):
                return True
            if isinstance(st, ast.Try) and sub is st.body and _breaks(st.orelse):
                return True
            return _breaks(block[i + 1:])
    return False


def _breaks(rest: list[ast.stmt]) -> bool:
    return any(isinstance(st, ast.Break) for st in rest)


def _own_pass(f: LoopFacts, loop: ast.stmt, s: Step) -> bool:
    """Between ``loop`` and the step, a clear of that optimizer and then a backward: the step
    applies that backward's gradient, and what the loop's passes left was wiped (the loop
    took gradients for something else: an adversarial example, a probe) (fast_adversarial's
    PGD loop before the training step)."""
    return any(f.before(loop, z.stmt) and not f.inside(z.stmt, loop) and f.before(z.stmt, s.stmt)
               and covers(f, z, s) and any(
                   f.before(z.stmt, b.stmt) and f.before(b.stmt, s.stmt)
                   and not f.inside(b.stmt, loop) for b in f.backwards)
               for z in f.zero_grads)


def _grads_written(f: LoopFacts, loop: ast.stmt, s: Step) -> bool:
    """Between ``loop`` and the step, a statement writes ``.grad`` from something else than a
    gradient (``p.grad = total[i]``, ``p.grad.data = ...``, ``p.grad.copy_(...)``; not
    ``p.grad = p.grad.clamp(...)``): the step applies what was written there,
    not what the loop's last pass left (a per-sample loop that clears, backpropagates and
    adds each pass's clipped gradient into its own buffers, then sets them as the gradients:
    differentially private SGD)."""
    run = f.within(loop)  # (makes the statement order `_order`)
    order = f.__dict__.get("_order")
    stmts = f.scope.stmts
    if not run or order is None:
        return False
    lo, hi = order.get(id(run[-1])), order.get(id(s.stmt))
    if lo is None or hi is None:
        return False
    for st in stmts[lo + 1:hi]:
        if isinstance(st, (ast.Assign, ast.AnnAssign)) and st.value is not None:
            targets = st.targets if isinstance(st, ast.Assign) else [st.target]
            if any(_names_grad(t) for t in targets) and not _reads_grad(st.value) \
                    and not isinstance(st.value, ast.Constant):  # `p.grad = None`
                return True
        for n in f.calls_of(st):
            if isinstance(n.func, ast.Attribute) and n.func.attr in ("copy_", "set_") \
                    and _names_grad(n.func.value) and not any(map(_reads_grad, n.args)):
                return True
    return False


def _reads_grad(e: ast.AST) -> bool:
    """``e`` reads some ``.grad``: a write of it (``p.grad = p.grad.clamp(-1, 1)``) still
    holds the last pass's gradient."""
    return any(isinstance(n, ast.Attribute) and n.attr == "grad" for n in walk(e))


def _names_grad(t: ast.AST) -> bool:
    """``x.grad`` or ``x.grad.data``."""
    if isinstance(t, ast.Attribute) and t.attr == "data":
        t = t.value
    return isinstance(t, ast.Attribute) and t.attr == "grad"


def _accumulated_over(f: LoopFacts, loop: ast.stmt) -> str | None:
    """A name that both counts the passes of ``loop`` (it appears in the loop's iterable:
    ``range(accum)``, ``x.chunk(accum)``) and divides the loss of a backward inside it: the
    gradients of the passes are meant to add up (NOTE [step level])."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return None
    names = {d for n in walk(loop.iter) if (d := dotted(n)) and isinstance(n, (ast.Name,
                                                                             ast.Attribute))}
    for b in f.backwards:
        if b.accumulates and f.inside(b.stmt, loop):
            for n in sorted(names):
                if _divided_by(f, b, loop, n):
                    return n
    return None


def _divided_by(f: LoopFacts, b: Backward, loop: ast.stmt, divisor: str) -> bool:
    """The loss of ``b``, or a binding of the loop it is computed from, is divided by
    ``divisor`` (``loss / accum``, ``loss /= accum``, ``loss.div(accum)``); a binding in
    another arm of an ``if`` than ``b`` does not reach it."""
    def divides(node: ast.AST) -> bool:
        for n in walk(node):
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) and \
                    dotted(n.right) == divisor:
                return True
            if isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Div) and \
                    dotted(n.value) == divisor:
                return True
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                    n.func.attr in ("div", "div_", "true_divide") and n.args and \
                    dotted(n.args[0]) == divisor:
                return True
        return False
    if b.loss is None:
        return False
    if divides(b.loss):
        return True
    name = dotted(b.loss)
    if name and any(f.inside(x.stmt, loop) and divides(x.stmt)
                    and not f.scope.exclusive(x.stmt, b.stmt)
                    for x in f.scope.bindings.get(name, ())):
        return True
    deps = graphs(f.scope).deps(b.loss, b.stmt.lineno)
    return any(f.inside(d.stmt, loop) and isinstance(d.stmt, (ast.Assign, ast.AnnAssign,
                                                              ast.AugAssign))
               and not f.scope.exclusive(d.stmt, b.stmt) and divides(d.stmt)
               for d in deps.bindings)


def _accumulation_branch(f: LoopFacts, s: Step, loop: ast.stmt
                         ) -> tuple[ast.If, str, Backward] | None:
    """An ``if ... % N`` branch of ``loop`` not around ``s``, with an every-pass backward
    of the loop whose loss is divided by ``N``. A backward in another arm of an ``if`` than
    ``s`` never runs in the pass that steps (``if accum > 1: (loss / accum).backward(); ...``
    / ``else: loss.backward(); opt.step()``: the plain arm steps its own undivided loss)."""
    for x in f.within(loop):
        if not isinstance(x, ast.If) or x is loop or f.inside(s.stmt, x) \
                or f.scope.exclusive(s.stmt, x) or tuple(f.loops_of(x)[-1:]) != (loop,):
            continue  # (a branch of an inner loop: the step after it flushes what is left)
        for m in _remainders(x.test):
            n = dotted(m.right)
            if n is None:
                continue
            for b in f.backwards:
                if b.accumulates and f.inside(b.stmt, loop) and not f.inside(b.stmt, x) \
                        and not f.scope.exclusive(s.stmt, b.stmt) and _divided_by(f, b, loop, n):
                    return x, n, b
    return None


class StepOutsideAccumulationBranch(LoopRule):
    """The loss is divided by `N` for gradient accumulation, but `step()` runs on every pass,
    outside the `if ... % N == 0:` branch.

    Why: dividing the loss by `N` and testing `% N` say that `N` micro-batches should add up
    in `.grad` before one step; a step outside that branch (at the loop level, or under an
    unrelated `if optimizer is not None:`) runs on every pass: `N` times more steps than
    meant, each with one micro-batch's gradient scaled down by `N` (thuml/OpenPrompt-style
    loops). Move the step (and its `zero_grad()`) under the `% N` branch.
    The same holds when the `% N` branch itself steps that optimizer (the gradients are
    scaled and stepped there every `N` passes) and a second step of it runs on every pass
    outside the branch (ECO-pytorch's stray `optimizer.step()` after its `iter_size` block):
    remove the step outside.
    Known limits: the branch must test a remainder by a name (`% accum`), and either the loss
    of a backward of the same loop must be divided by that same name or the branch must step
    the same optimizer.
    """

    code = "GT519"
    gate_statements = True
    name = "step-outside-accumulation-branch"
    message = ("`{call}` runs on every pass, but {why} `if {test}:` (line {if_line}), which "
               "marks an accumulation: {effect}")
    triggers = (".step(",)
    function_needs = ("backward", "step", "%")
    examples = [
        Bad("""
            for i, (x, y) in enumerate(loader):
                loss = criterion(model(x), y) / accum
                loss.backward()
                if (i + 1) % accum == 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad()
            """, at=(6, 4)),
        Bad("""
            for i, (x, y) in enumerate(loader):
                criterion(model(x), y).backward()
                if i % iter_size == 0:
                    for p in model.parameters():
                        p.grad /= iter_size
                    optimizer.step()
                    optimizer.zero_grad()
                optimizer.step()
            """, at=(8, 4)),
        Good("""
            for i, (x, y) in enumerate(loader):
                loss = criterion(model(x), y) / accum
                loss.backward()
                if (i + 1) % accum == 0:
                    optimizer.step()
                    optimizer.zero_grad()
                if i % log_every == 0:
                    print(loss.item())
            """),
        Good("""
            for i, (x, y) in enumerate(loader):
                loss = criterion(model(x), y) / batch_size
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                if i % batch_size == 0:
                    print(loss.item())
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        for s in f.steps:
            loop = None if s.closure else step_loop(f, s)
            if loop is None or periodic_guard(f, s.stmt, loop) is not None \
                    or _skipped_off_period(f, s, loop):
                continue
            got = _accumulation_branch(f, s, loop)
            if got is not None:
                guard, n, b = got
                if not _marks_steps(f, guard, loop):
                    continue
                yield self.report(s.call, ctx, related=(
                    related_at(ctx, guard, f"every `{n}`-th pass is marked here"),),
                    call=ctx.source(s.call), test=ctx.source(guard.test), if_line=guard.lineno,
                    why=f"the loss is divided by `{n}` (line {b.call.lineno}) and",
                    effect=f"each step applies one micro-batch's gradient scaled down by `{n}`; "
                           "move the step and its `zero_grad()` under that `if`")
                continue
            twin = _stepping_branch(f, s, loop)
            if twin is not None:
                guard, n, other = twin
                yield self.report(s.call, ctx, related=(
                    related_at(ctx, other.call, f"the same optimizer steps here every `{n}`-th "
                               "pass"),),
                    call=ctx.source(s.call), test=ctx.source(guard.test), if_line=guard.lineno,
                    why=f"`{ctx.source(other.call)}` (line {other.call.lineno}) already steps "
                        "the same optimizer under",
                    effect="the extra step applies each pass's gradient on its own, so there is "
                           "no accumulation; remove the step outside that `if`")


def _stepping_branch(f: LoopFacts, s: Step, loop: ast.stmt
                     ) -> tuple[ast.If, str, Step] | None:
    """An ``if ... % N`` branch of ``loop`` (``N`` a name, not 1), not around ``s``, that
    steps the same optimizer as ``s``, with a backward of the loop on every pass: the loop
    accumulates over ``N`` passes and ``s`` steps on every one of them as well (ECO-pytorch's
    stray step after the ``iter_size`` block). A step in another arm of an ``if`` than the
    branch's step never runs in the same pass (``if k is None: step`` / ``elif i % k == 0:
    step``; a TPU arm stepping on every pass beside a GPU arm that accumulates). A branch that
    clears and backwards on its own is not one (NOTE [periodic update of its own])."""
    for x in f.within(loop):
        if not isinstance(x, ast.If) or x is loop or f.inside(s.stmt, x) \
                or tuple(f.loops_of(x)[-1:]) != (loop,):
            continue
        mods = [m for m in _remainders(x.test) if dotted(m.right) and not _period_one(f, m)]
        if not mods:
            continue
        other = next((o for o in f.steps if o is not s and o.optimizer == s.optimizer
                      and not o.closure and f.inside(o.stmt, x)
                      and step_loop(f, o) is loop and not f.scope.exclusive(s.stmt, o.stmt)),
                     None)
        if other is None or not any(b.accumulates and f.inside(b.stmt, loop)
                                    and not f.inside(b.stmt, x) for b in f.backwards) \
                or _own_update(f, x, other):
            continue
        return x, dotted(mods[0].right) or "", other
    return None


def _own_update(f: LoopFacts, branch: ast.If, other: Step) -> bool:
    """# NOTE [periodic update of its own]
    The branch clears the gradients of the optimizer it steps, then runs a backward of its
    own, before that step (StyleGAN2's lazy R1 regularisation: ``if i % d_reg_every == 0:
    d_optim.zero_grad(); r1_loss.backward(); d_optim.step()``): its step applies the branch's
    gradient alone, a second update every ``N``-th pass on top of the main step, not the end
    of an accumulation; the main step of every pass is the design."""
    return any(f.inside(z.stmt, branch) and f.before(z.stmt, other.stmt) and clears(f, z, other)
               and any(f.inside(b.stmt, branch) and f.before(z.stmt, b.stmt)
                       and f.before(b.stmt, other.stmt) for b in f.backwards)
               for z in f.zero_grads)


def _skipped_off_period(f: LoopFacts, s: Step, loop: ast.stmt) -> bool:
    """Before the step, in its block or one around it inside ``loop``, an ``if`` testing a
    remainder ends the pass with ``continue`` (``if step % accum != 0: continue``): the passes
    that reach the step are the periodic ones, as under ``if step % accum == 0:``."""
    ps = f.paths.get(id(s.stmt))
    for x in f.within(loop):
        px = f.paths.get(id(x))
        if not isinstance(x, ast.If) or x is loop or px is None or ps is None \
                or f.inside(s.stmt, x) or len(px) > len(ps) or px[:-1] != ps[:len(px) - 1] \
                or px[-1][:2] != ps[len(px) - 1][:2] or px[-1][2] >= ps[len(px) - 1][2] \
                or not f.inside(x, loop) or f.loops_of(x)[-1:] != (loop,):
            continue
        mods = _remainders(x.test)
        if mods and not all(_period_one(f, m) for m in mods) \
                and any(isinstance(st, ast.Continue) for st in x.body):
            return True
    return False


def _marks_steps(f: LoopFacts, guard: ast.If, loop: ast.stmt) -> bool:
    """The branch does training-step work (clips, counts a step, calls a scheduler or
    clears) rather than only logging: it holds a clip, a zero_grad, an assignment or a
    ``.step(`` call, and no ``print``/``log`` call only."""
    if any(f.inside(c.stmt, guard) for c in f.clips) or \
            any(f.inside(z.stmt, guard) for z in f.zero_grads):
        return True
    for x in f.within(guard):
        if isinstance(x, (ast.AugAssign, ast.Assign)):
            return True
        if isinstance(x, ast.Expr) and isinstance(x.value, ast.Call) and \
                isinstance(x.value.func, ast.Attribute) and x.value.func.attr == "step":
            return True
    return False
