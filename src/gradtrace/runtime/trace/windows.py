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
"""
from __future__ import annotations

import ast
from collections import Counter
from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import make, src
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.locate import enclosing_loop, tree_of

WINDOWS = 64  # steps per optimizer whose window is kept


def note_window(state: Any, rec: Any) -> None:
    """From the step pre-hook: the backward() calls this step sums."""
    if len(rec.windows) < WINDOWS:
        rec.windows.append(state.fresh_count if state.fresh_grads else 0)


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
    """NOTE [accumulation window off by one]."""
    if state.closure_steps:
        return []
    out: list[Finding] = []
    for rec in list(data.optimizers.values()):
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
