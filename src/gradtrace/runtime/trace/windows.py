"""Gradient-accumulation windows: how many backward() calls each optimizer step summed.

# NOTE [accumulation window off by one]
Gradient accumulation steps once every ``k`` micro-batches. A condition written
``batch_idx % k == 0`` on a counter that starts at 0 is true on the *first* batch: the first
step applies the gradient of one micro-batch, every later step the sum of ``k``, and the
micro-batches after the last multiple of ``k`` are summed into ``.grad`` and never applied.
Nothing fails. The run counts, at each step, the backward() calls made since the previous
step (``TraceState.fresh_count``) for each optimizer, over its first steps. It reports an
optimizer whose first step summed one backward() while later steps sum ``k >= 2`` (at least
twice, and never more than ``k``): an accumulation whose window starts one batch early. A first
window as wide as the others (``(batch_idx + 1) % k == 0``), a last window narrower than ``k``
(a partial window flushed at the end of an epoch) and a step after every backward() are silent.
The line named is the ``if`` that guards the step, when the step sits in one inside its loop;
else the step.

# NOTE [evaluation gradients applied]
A loss helper that calls backward() itself (the Annotated Transformer's ``SimpleLossCompute``)
and steps only when it was given an optimizer also runs backward() in the validation pass,
where it is given none: those gradients stay in ``.grad`` (the training step zeroes after its
step, not before) and the first training step of the next epoch applies them. The run counts
module calls with grad on in eval mode and calls of layers with parameters in train mode (the
global pre-hook; a loss module is never put in eval mode); a backward() after calls in eval
mode only is an evaluation backward (a model whose frozen part stays in eval while the rest
trains also makes calls in train mode) when it fills the gradient of a parameter an optimizer
holds (a Grad-CAM backward through a frozen teacher in eval mode writes none: no step applies
it). An optimizer step whose window mixes evaluation backward()
calls with others, and sums more backward() calls than its steps usually do (at least two other
steps agree on the usual count), is reported at the line of the evaluation backward(). A model
trained in eval mode throughout (every backward() of the window after eval-mode calls) and
gradients cleared before the step (a saliency map in eval mode, then ``zero_grad()``) are silent.

# NOTE [partial window carried into the next]
An accumulation loop that restarts its window at each pass over the data (``sub_batch_idx``
from ``enumerate``) leaves the backward() calls after the last full window in ``.grad``; the
program must flush them (step on them, or clear them) when the pass ends. icefall's HuBERT
recipes clear them with ``if batch_idx % accum_grad != accum_grad - 1: optimizer.zero_grad()``
after the loop, testing ``batch_idx`` (the step count) instead of the sub-batch index: the
clear does not run, and the next pass's first step sums those calls with its own window.
The run sees it in the step windows: steps usually sum ``k >= 2`` backward() calls (at least
twice, the first one too), and a few (at most a third) sum ``k + r`` with ``0 < r < k`` while
every other sums ``k``. The
line named is the ``if`` after the step's loop (in the same function) whose body clears the
gradients, when there is one: the flush that did not run; else the step. Windows that vary
(accumulation by tokens), a partial window stepped or cleared at the end of the pass, and a
counter that runs on across passes (every window ``k``) are silent.
"""
from __future__ import annotations

import ast
from collections import Counter
from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import make, src
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.locate import enclosing_loop, tree_of
from gradtrace.runtime.trace.unscaled import note_window as unscaled_window
from gradtrace.runtime.trace.unscaled import unscaled_findings

WINDOWS = 64  # steps per optimizer whose window is kept


def note_window(state: Any, rec: Any) -> None:
    """From the step pre-hook: the backward() calls this step sums (and how many of them ran
    after forwards in eval mode: NOTE [evaluation gradients applied])."""
    count = state.fresh_count if state.fresh_grads else 0
    if len(rec.windows) < WINDOWS:
        rec.windows.append(count)
        unscaled_window(state, count, rec.ref())  # NOTE [accumulated means not scaled]
        if rec.leak is None and 0 < state.window_evals < count \
                and state.eval_backward is not None:
            rec.leak = (state.eval_backward, state.window_evals, len(rec.windows) - 1)


def note_backward(state: Any, data: Any) -> None:
    """At a backward() start: whether the modules run since the last one (grad on) all ran in
    eval mode."""
    if not state.fresh_grads or state.fresh_count == 0:  # a new window
        state.window_evals = 0
    seen = (data.eval_calls, data.train_calls)
    state.eval_filled = None
    if seen[0] != state.evals_seen[0] and seen[1] == state.evals_seen[1] \
            and state.backward_sites and state.eval_checks < 256:
        state.eval_checks += 1  # (settled at its end: eval_backward_done)
        state.eval_filled = (state.backward_sites[-1], _grad_marks(data))
    state.evals_seen = seen


def _grad_marks(data: Any) -> list[tuple[Any, int, int]]:
    """The optimizers' parameters with, for each, its gradient's id and version (-1, -1: none)."""
    out: list[tuple[Any, int, int]] = []
    with torch._C.DisableTorchFunction():  # (not the program's `.grad` reads)
        for rec in list(data.optimizers.values()):
            opt = rec.ref()
            for g in (opt.param_groups if opt is not None else ()):
                for p in g["params"]:
                    grad = p.grad
                    out.append((p, -1, -1) if grad is None else (p, id(grad), grad._version))
    return out


def eval_backward_done(state: Any) -> None:
    """At the end of a backward() begun after eval-mode calls only: it is an evaluation backward
    only if it filled a gradient of a parameter an optimizer holds (a Grad-CAM backward through a
    frozen teacher in eval mode writes none, and no step applies it)."""
    site, marks = state.eval_filled
    state.eval_filled = None
    with torch._C.DisableTorchFunction():
        for p, gid, version in marks:
            grad = p.grad
            if grad is not None and (id(grad) != gid or grad._version != version):
                state.window_evals += 1
                state.eval_backward = site
                return


def _early(windows: list[int]) -> int:
    """``k`` when the first window is one backward() and the later ones ``k >= 2``, else 0."""
    if len(windows) < 3 or windows[0] != 1:
        return 0
    rest = windows[1:]
    k, n = Counter(rest).most_common(1)[0]
    return k if k >= 2 and n >= 2 and max(rest) <= k else 0


def _guard(step: Site) -> Site | None:
    """The innermost ``if`` whose body holds the step, inside the step's innermost loop."""
    tree = tree_of(step.path)
    if tree is None:
        return None
    loop = enclosing_loop(step)
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and node.body and node.body[0].lineno <= step.line <= \
                (node.body[-1].end_lineno or node.body[-1].lineno) and \
                (loop is None or node.lineno > loop.lineno):
            if best is None or node.lineno > best.lineno:
                best = node
    return None if best is None else Site(step.path, best.lineno, step.function)


def window_findings(state: Any, data: Any) -> list[Finding]:
    """NOTE [accumulation window off by one], NOTE [evaluation gradients applied]."""
    if state.closure_steps:
        return []
    out: list[Finding] = unscaled_findings(state)
    for rec in list(data.optimizers.values()):
        out += _leak_finding(rec) + _carried_finding(rec)
        k = _early(rec.windows)
        if not k or rec.site is None:
            continue
        guard = _guard(rec.site)
        shown = ", ".join(str(w) for w in rec.windows[:6]) + (", ..." if len(rec.windows) > 6
                                                              else "")
        left = state.fresh_count if state.fresh_grads else 0
        tail = (f"; the last {left} backward() call{'s' if left > 1 else ''} of the run "
                f"{'were' if left > 1 else 'was'} never applied") if left else ""
        related = [(rec.site, "the optimizer steps here")] if guard is not None else []
        out.append(make("GT879", guard or rec.site,
                        f"the accumulation window starts one batch early: the first "
                        f"optimizer step applied the gradient of 1 backward(), the later ones "
                        f"the sum of {k} (backward() calls per step: {shown}){tail}; "
                        f"{src(guard) if guard else 'the step'} is true on the first batch "
                        f"(a counter from 0 makes `i % {k} == 0` true at i = 0)",
                        fix=f"step when `(i + 1) % {k} == 0` (or count the micro-batches from 1), "
                            "and flush the last partial window after the loop",
                        related=related, severity="warning"))
    return out


def _carried_finding(rec: Any) -> list[Finding]:
    """NOTE [partial window carried into the next]."""
    usual = Counter(rec.windows).most_common(1)
    if not usual or usual[0][1] < 2 or usual[0][0] < 2 or rec.site is None:
        return []
    k = usual[0][0]
    wide = [w for w in rec.windows if w != k]
    if not wide or any(not k < w < 2 * k for w in wide) or rec.windows[0] != k \
            or 3 * len(wide) > len(rec.windows):  # (a leftover per pass, not windows that vary)
        return []
    flush = _flush_after_loop(rec.site)
    r = wide[0] - k
    return [make("GT892", flush or rec.site,
                 f"an optimizer step summed {wide[0]} backward() calls where its steps usually "
                 f"sum {k} (backward() calls per step: "
                 f"{', '.join(str(w) for w in rec.windows[:8])}{', ...' if len(rec.windows) > 8 else ''}): "
                 f"{r} backward() call{'s' if r > 1 else ''} of an incomplete window left at the "
                 f"end of a pass over the data {'were' if r > 1 else 'was'} neither applied nor "
                 "cleared, and the next "
                 "pass's first step added them to its own window" + (
                     "; this flush of the partial window did not run" if flush else ""),
                 fix="clear (or step on) the partial window when the pass ends, testing the "
                     "micro-batch index that decides the steps",
                 related=[(rec.site, "the optimizer steps here")], severity="warning")]


def _flush_after_loop(step: Site) -> Site | None:
    """The first ``if`` after the step's loop, in the step's function, whose body clears
    gradients (``zero_grad()``)."""
    loop = enclosing_loop(step)
    tree = tree_of(step.path)
    if loop is None or tree is None:
        return None
    fn = next((f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
               and any(n is loop for n in ast.walk(f))), tree)
    end = loop.end_lineno or loop.lineno
    for node in sorted((n for n in ast.walk(fn) if isinstance(n, ast.If) and n.lineno > end),
                       key=lambda n: n.lineno):
        if any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
               and c.func.attr == "zero_grad" for b in node.body for c in ast.walk(b)):
            return Site(step.path, node.lineno, step.function)
    return None


def _leak_finding(rec: Any) -> list[Finding]:
    if rec.leak is None:
        return []
    line, evals, at = rec.leak
    usual = Counter(w for i, w in enumerate(rec.windows) if i != at).most_common(1)
    if not usual or usual[0][1] < 2 or rec.windows[at] <= usual[0][0]:
        return []
    return [make("GT873", line,
                 f"this backward() also ran after forward passes in eval mode ({evals} "
                 f"time{'s' if evals > 1 else ''}: an evaluation), and nothing cleared those "
                 f"gradients: the next optimizer step summed {rec.windows[at]} backward() "
                 f"calls where its steps usually sum {usual[0][0]}, so the evaluation data is "
                 "trained on",
                 fix="do not call backward() when evaluating (compute the loss under "
                     "torch.no_grad()), or zero the gradients before the next training step",
                 related=[(rec.site, "the optimizer applies them here")], severity="warning")]
