"""GT536: an accumulation step guarded by ``i % k == 0`` on a pass index counted from 0.

# NOTE [window starts one pass early]
``for i, batch in enumerate(loader): loss.backward(); if i % k == 0: opt.step(); opt.zero_grad()``
steps on the *first* pass (0 % k == 0): the first step applies one micro-batch's gradient, every
later one ``k``, and the passes after the last multiple of ``k`` are summed into ``.grad`` and
not applied by this loop. Nothing fails (the run's twin is GT879). Said when the step's ``if``
tests exactly ``<index> % <k> == 0``, the index is the loop's own pass count from 0
(``enumerate(x)`` without a start, or ``range(n)``), and a backward of the loop runs on every
pass before that ``if``, as ``loss.backward()`` (``accelerator.backward(loss)`` under DeepSpeed
counts the micro-steps itself). ``(i + 1) % k == 0``, ``enumerate(x, 1)``, ``i % k == k - 1``, a test
with more terms and a step before the backward of its pass are silent.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.rules.training_loop._base import LoopRule, related_at
from gradtrace.lint.rules.training_loop._loop import LoopFacts
from gradtrace.lint.rules.training_loop._loss_scaling import _plain_backward
from gradtrace.lint.rules.training_loop.micro_steps import _every_pass, periodic_steps


def _zero_based_index(loop: ast.stmt) -> str | None:
    """The name of the pass index of ``loop`` when it counts from 0."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)) or not isinstance(loop.iter, ast.Call):
        return None
    it, target = loop.iter, loop.target
    fn = it.func.id if isinstance(it.func, ast.Name) else None
    start = it.args[1] if len(it.args) > 1 else next(
        (k.value for k in it.keywords if k.arg == "start"), None)
    zero = start is None or isinstance(start, ast.Constant) and start.value == 0
    if fn == "enumerate" and zero and isinstance(target, ast.Tuple) and target.elts \
            and isinstance(target.elts[0], ast.Name):
        return target.elts[0].id
    if fn == "range" and (len(it.args) == 1 or len(it.args) == 2 and zero and not it.keywords) \
            and isinstance(target, ast.Name):
        return target.id
    return None


def _first_pass_test(test: ast.AST, index: str) -> ast.AST | None:
    """The divisor of ``index % k == 0`` (either side), else None."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq)):
        return None
    left, right = test.left, test.comparators[0]
    if isinstance(left, ast.Constant):
        left, right = right, left
    if isinstance(right, ast.Constant) and right.value == 0 and isinstance(left, ast.BinOp) \
            and isinstance(left.op, ast.Mod) and isinstance(left.left, ast.Name) \
            and left.left.id == index:
        return left.right
    return None


class AccumulationWindowStartsEarly(LoopRule):
    """Gradient accumulation that steps on the first pass (`i % k == 0` with `i` from 0).

    Why: `enumerate` counts from 0, and `0 % k == 0`: the first step applies the gradient of
    one micro-batch, every later step the sum of `k`, and the micro-batches after the last
    multiple of `k` are summed into `.grad` and never applied by this loop. Step when
    `(i + 1) % k == 0` (or count from 1) and flush the last partial window after the loop.
    Known limits: the test must be exactly `index % k == 0` on the loop's own index
    (`enumerate(...)` without a start, or `range(n)`), and a backward must run on every pass
    before the step's `if`; counters kept by hand are left to the run (GT879).
    """

    code = "GT536"
    needs_step = True  # NOTE [step files]
    gate_statements = True
    name = "accumulation-window-starts-early"
    message = ("`{test}` is true on the first pass (`{index}` counts from 0): the first "
               "`{opt}.step()` applies one micro-batch's gradient and every later one the sum "
               "of `{k}`, and the passes after the last multiple of `{k}` are summed into "
               "`.grad` and not applied by this loop; step when `({index} + 1) % {k} == 0`")
    severity = "warning"
    triggers = ("enumerate(", "range(")
    function_needs = ("backward", "step", "%")
    examples = [
        Bad("""
            for batch_idx, (x, y) in enumerate(loader):
                loss = criterion(model(x), y) / accumulation_steps
                loss.backward()
                if batch_idx % accumulation_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
            """, at=(4, 4)),
        Good("""
            for batch_idx, (x, y) in enumerate(loader):
                loss = criterion(model(x), y) / accumulation_steps
                loss.backward()
                if (batch_idx + 1) % accumulation_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
            """),
        Good("""
            for batch_idx, (x, y) in enumerate(loader, 1):
                loss = criterion(model(x), y) / accumulation_steps
                loss.backward()
                if batch_idx % accumulation_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        seen: set[int] = set()
        for s, loop, guard, _mods in periodic_steps(f):
            if id(guard) in seen:
                continue
            index = _zero_based_index(loop)
            k = _first_pass_test(guard.test, index) if index else None
            if k is None or any(isinstance(n, ast.Name) and n.id == index for n in ast.walk(k)):
                continue
            backs = [b for b in _every_pass(f, loop, guard) if f.before(b.stmt, guard)]
            if not backs or not all(_plain_backward(b) for b in backs):  # an engine's
                continue  # backward (accelerate, DeepSpeed) keeps its own accumulation count
                continue
            seen.add(id(guard))
            yield self.report(guard, ctx, related=(
                related_at(ctx, backs[0].call, "each pass adds its micro-batch's gradient here"),
                related_at(ctx, s.call, "the step runs here")),
                test=ctx.source(guard.test), index=index, opt=s.optimizer, k=ctx.source(k))
