"""Gradient-accumulation blocks an engine opens around one micro-step, for GT512.

# NOTE [accumulation context]
``with accelerator.accumulate(model):`` runs its body once per micro-batch; the optimizer the
engine wraps (``accelerator.prepare(opt)``) skips ``zero_grad()`` and ``step()`` on every
micro-step but the window's last, where both run. A ``zero_grad()`` in the body *before* the
backward therefore runs, on that last micro-step, after the window's other micro-batches
added their gradients and before the last one's: the update applies the last micro-batch's
gradient alone (checked with accelerate 1.16 on torch 2.13: 4 micro-steps, the update is the
last one's gradient / 4, not the window's mean; cleared after the step, it is the mean).
Holds no rule.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.lint.analysis.vocabulary import ACCUMULATION_CONTEXTS
from gradtrace.lint.rules.training_loop._loop import LoopFacts
from gradtrace.lint.rules.training_loop.zero_grad import covers


def accumulation_clears(f: LoopFacts) -> Iterator[tuple[object, object, object, ast.stmt]]:
    """(clear, step, backward, the ``with``) for each accumulation block of ``f`` whose body
    clears the step's optimizer before its backward (NOTE [accumulation context])."""
    for w in f.scope.stmts:
        if not isinstance(w, (ast.With, ast.AsyncWith)) or not any(
                isinstance(i.context_expr, ast.Call)
                and isinstance(i.context_expr.func, ast.Attribute)
                and i.context_expr.func.attr in ACCUMULATION_CONTEXTS for i in w.items):
            continue
        ifs = [x for x in f.within(w) if isinstance(x, (ast.If, ast.Try)) and x is not w]
        backs = [b for b in f.backwards if f.inside(b.stmt, w)]
        for s in (s for s in f.steps if f.inside(s.stmt, w)):
            hit = None
            for z in f.zero_grads:  # this optimizer's own clear, before its step
                if not f.inside(z.stmt, w) or z.receiver != s.optimizer \
                        or not covers(f, z, s) or not f.before(z.stmt, s.stmt) \
                        or any(f.inside(z.stmt, x) for x in ifs):
                    continue
                b = next((b for b in backs if f.before(z.stmt, b.stmt)
                          and f.before(b.stmt, s.stmt)), None)  # a backward it steps
                if b is not None:
                    hit = (z, s, b, w)
                    break
            if hit is not None:
                yield hit
                break
