"""A second ``step()`` of one optimizer in a loop that accumulates gradients.

# NOTE [extra step outside the accumulation condition]
A loop that accumulates gradients steps inside a condition (``if i % k == 0:``) and clears the
gradients there. A second ``optimizer.step()`` of the same optimizer left in the loop body,
outside that condition (a line the accumulation's author forgot to remove), steps on every
iteration with the partial sum the accumulation is still building: the accumulation silently
becomes a per-batch update, and nothing fails. The run sees the symptom (a backward() adding
into gradients an earlier step already applied, no zero_grad between); the line that accounts
for it is the unconditional step. It is named when that step, in the loop body, is not inside
the ``if`` that holds the other step of the same spelled optimizer together with a
``zero_grad()``: read in the file that ran. A loop whose only step is the guarded one, and two
steps of different optimizers, are left to the other findings.
"""
from __future__ import annotations

import ast
from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.locate import enclosing_loop


def _method_calls(node: ast.AST, method: str) -> list[ast.Call]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(
        n.func, ast.Attribute) and n.func.attr == method]


def extra_step(step: Site | None) -> Site | None:
    """``step`` when it is the unconditional second step described in the NOTE, else None."""
    loop = enclosing_loop(step)
    if loop is None or step is None:
        return None
    mine = [c for c in _method_calls(loop, "step") if c.lineno == step.line]
    if len(mine) != 1:
        return None
    spelled = ast.unparse(mine[0].func.value)  # type: ignore[attr-defined]
    ifs = [n for n in ast.walk(loop) if isinstance(n, ast.If) and n.lineno > loop.lineno]
    if any(n.lineno <= step.line <= (n.end_lineno or n.lineno) for n in ifs):
        return None  # the step itself is conditional
    for node in ifs:
        inside = [c for c in _method_calls(node, "step")
                  if ast.unparse(c.func.value) == spelled]  # type: ignore[attr-defined]
        if inside and _method_calls(node, "zero_grad") and inside[0].lineno < step.line:
            return step
    return None


EXTRA_STEP = ("this optimizer.step() runs on every iteration, outside the condition under "
              "which the same optimizer already steps and clears its gradients: it steps "
              "again on the partial, unscaled sum the accumulation is still building, so the "
              "accumulation becomes a per-batch update")


def watch_clears(state: Any, old: Any, rep: Any) -> None:
    """# NOTE [clear on some passes only]
    eve's training loop clears the gradients in the ``else`` branch of ``if step % k == 0:``
    (the unsupervised pass) and runs ``backward()`` and ``step()`` after the ``if`` on both
    paths: on the supervised pass the backward() adds into the gradients the previous step
    applied. The run sees the accumulation (NOTE [discarded gradients]' sibling in
    ``accumulation_findings``); the line that accounts for it is the clear that ran on earlier
    passes and not on this one. Each optimizer's representative parameter (the one its
    accumulation check follows) and its gradient are watched: a ``.grad = None`` or a
    ``zero_()``/``_foreach_zero_`` on them records the user's line (one dict lookup per
    cleared gradient, a frame walk only for the watched ones). When a step finds its
    gradients accumulated and the parameter was cleared on an earlier pass at a line that sits
    inside an ``if`` (or ``else``) branch not holding the step, that clear is named; a clear
    that runs on every pass (after the step, before the loop) keeps the backward()'s line."""
    watch = state.clear_watch
    if old is not None:
        for key in old[:2]:
            watch.pop(key, None)
        if rep is None or rep[0] != old[0]:
            state.clear_sites.pop(old[0], None)
    if rep is not None and len(watch) < 512:
        watch[rep[0]] = watch[rep[1]] = rep[0]


def branch_clear(clear: Site | None, step: Site | None) -> Site | None:
    """``clear`` when it sits in one branch of an ``if`` (of its function) that does not hold
    ``step`` (NOTE [clear on some passes only]), else None."""
    from gradtrace.runtime.trace.diagnose_args import _scope
    from gradtrace.runtime.trace.locate import tree_of

    tree = tree_of(clear.path) if clear is not None else None
    if tree is None or step is None:
        return None
    for node in ast.walk(_scope(tree, clear.line)):
        if not isinstance(node, ast.If):
            continue
        for branch in (node.body, node.orelse):
            if branch and branch[0].lineno <= clear.line <= (branch[-1].end_lineno or 0) and \
                    not (step.path == clear.path and node.lineno <= step.line
                         <= (node.end_lineno or 0)):
                return clear
    return None


def accumulation_findings(rec: Any) -> list[Finding]:
    """GT501 at run time for one optimizer's record: the backward() that added into gradients
    a step already applied, or (NOTE [extra step outside the accumulation condition]) the
    unconditional second step that applied them."""
    if rec.accumulate_site is None:
        return []
    code = code_for("zero-grad-missing", "GT823")
    extra = extra_step(rec.accumulate_step)
    if extra is not None:
        return [make(code, extra, EXTRA_STEP, fix="remove this step (or move it inside the "
                     "condition)", related=[(rec.accumulate_site, "this backward() then adds "
                                             "into gradients already applied")],
                     severity="warning")]
    if rec.partial is not None:  # NOTE [clear of a part]
        from gradtrace.runtime.trace.partial_clear import partial_message
        return [make(code, rec.partial[0], partial_message(rec), fix="clear every parameter "
                     "the optimizer steps: call optimizer.zero_grad() (or the whole model's)",
                     related=[(rec.accumulate_site, "this backward() adds into the gradients "
                               "the last step applied"),
                              (rec.accumulate_step, "the optimizer steps here with the sum")],
                     severity="warning")]
    clear = branch_clear(rec.accumulate_clear, rec.accumulate_step)
    if clear is not None:
        return [make(code, clear, "the gradients are cleared here on some passes only: on the "
                     "pass before this optimizer's step the program took the other path, so "
                     "backward() added into the gradients the previous step had applied, and "
                     "the step used their sum", fix="clear the gradients on every path, before "
                     "the if (once per step, before backward())", related=[
                         (rec.accumulate_site, "this backward() added into the old gradients"),
                         (rec.accumulate_step, "the optimizer steps here with the sum")],
                     severity="warning")]
    return [make(code, rec.accumulate_site, "gradients keep accumulating across optimizer "
                 "steps: this backward() adds into .grad that still holds the previous step's "
                 "gradients (no zero_grad between the two steps)",
                 fix="call optimizer.zero_grad() once per step, before backward()",
                 related=[(rec.accumulate_step, "the optimizer steps here with the summed "
                           "gradients")] if rec.accumulate_step not in (
                               None, rec.accumulate_site) else [], severity="warning")]
