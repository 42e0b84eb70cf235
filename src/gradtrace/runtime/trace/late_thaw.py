"""GT895: parameters unfrozen only after the last optimizer step of the run.

# NOTE [unfrozen after the last step]
A freeze schedule (freeze a pretrained part for the first epochs, unfreeze it from a training
loop, an epoch-end callback) whose test fires one epoch late, or never before the loop ends,
leaves the part frozen at every step: nothing fails, the run trains the rest. The tracer sees
each ``requires_grad`` switch of a Parameter from False to True (the setter and
``requires_grad_``) made once two steps have ended, when an optimizer that stepped at least
twice holds the parameter and it never had a gradient at a step; it keeps the steps ended by
then, the user frames that made it and the first three names (switches before the second step
cost one comparison). When the run ends normally (no crash), no step came after the switch and
the parameters were not frozen again, the unfreeze had no effect on training. It is reported
only when the unfreeze was part of the training loop: the frame shared by the unfreeze and the
first ``step()`` runs both lines inside one ``for``/``while`` loop (a ``requires_grad_(True)``
that restores a model after training, or before saving it, is not in the loop), or both are
below one call of that frame (a trainer library's ``fit()`` runs the loop and calls the user's
epoch-end hook; then only the user frames below that call are searched). The finding names
the ``if`` that decided when to unfreeze: the innermost ``if`` (or ``elif``/``else``) holding
the call in the outermost frame that has one, from the shared frame (inside the loop)
inwards; the unfreeze itself is related. A parameter unfrozen before a later step, trained at
some step, or held by no optimizer is left alone (the last is NOTE [idle steps]' and GT821's
ground).
"""
from __future__ import annotations

import ast
from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import make, src
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.locate import tree_of

CODE = "GT895"
KEPT = 4096  # unfreezes remembered per run


def note_thaw(state: Any, t: torch.Tensor) -> None:
    """Record that Parameter ``t`` was switched from frozen to trainable now, when an optimizer
    that stepped at least twice holds it and it never had a gradient at a step (a set-up
    unfreeze before the second step costs one comparison)."""
    data = state.hooks_data
    if state.steps_ended < 2 or data is None or len(state.thaws) >= KEPT:
        return
    had = data.had_grad.get(id(t))
    if had is not None and had() is t:  # trained before (a GAN's per-step toggle): no table
        return
    held = state.thaw_held
    if held is None or held[0] != state.steps_ended:
        ids: dict[int, Any] = {}
        for rec in list(data.optimizers.values()):
            opt = rec.ref()
            if opt is not None and rec.steps >= 2:
                for g in opt.param_groups:
                    for p in g["params"]:
                        ids[id(p)] = rec
        held = state.thaw_held = (state.steps_ended, ids)
    rec = held[1].get(id(t))
    if rec is None:
        return
    import weakref

    from gradtrace.runtime.trace.hooks import param_name
    from gradtrace.runtime.trace.modes import user_stack

    for old in [k for k, g in state.thaws.items() if g["at"] != state.steps_ended]:
        del state.thaws[old]  # a step came after it: never reported (a per-step toggle)
    stack = user_stack()
    key = (tuple((fid, id(code), line) for fid, code, line in stack), state.steps_ended)
    group = state.thaws.get(key)
    if group is None:
        group = state.thaws[key] = {"stack": stack, "rec": rec, "at": state.steps_ended,
                                    "names": [], "refs": []}
    if len(group["names"]) < 3:
        names = state.thaw_names  # the same parameters toggled at every step: named once
        name = names.get(id(t))
        if name is None or name[0]() is not t:
            if len(names) >= 64:
                names.clear()
            name = names[id(t)] = (weakref.ref(t), param_name(data, t))
        group["names"].append(name[1])
    group["refs"].append(weakref.ref(t))


def late_thaw_findings(state: Any, data: Any) -> list[Finding]:
    """The findings of NOTE [unfrozen after the last step]."""
    if not state.thaws or state.crash_findings or not data.step_stack:
        return []
    out: list[Finding] = []
    for group in list(state.thaws.values()):
        if group["at"] != state.steps_ended:  # a step came after the unfreeze
            continue
        live = [r() for r in group["refs"]]
        if all(p is not None and not p.requires_grad for p in live):  # frozen again
            continue
        found = _finding(state, group)
        if found is not None:
            out.append(found)
    return out


def _finding(state: Any, group: dict[str, Any]) -> Finding | None:
    stack, rec = group["stack"], group["rec"]
    decider = _decider(stack, state.hooks_data.step_stack)
    if decider is None:
        return None
    code, line = stack[0][1], stack[0][2]
    thaw = Site(code.co_filename, line, code.co_name)
    n = len(group["refs"])
    more = f" and {n - 3} more" if n > 3 else ""
    return make(CODE, decider,
                f"{', '.join(group['names'])}{more} had no gradient at any of the "
                f"{rec.steps} steps of the optimizer that holds them and were set to require "
                f"grad only after its last step ({src(thaw)}): this test let the unfreeze "
                "happen too late, so they never trained",
                fix="unfreeze before the steps that should train them (check the epoch/step "
                    "counter this test compares: it is usually off by one or never reached)",
                related=[(thaw, "unfrozen here, after the last step")] +
                ([(rec.site, "the optimizer steps here")] if rec.site else []),
                severity="warning")


def _decider(stack: Any, step_stack: Any) -> Site | None:
    """The ``if`` that decided the unfreeze, when the unfreeze runs inside the training loop
    (NOTE [unfrozen after the last step]); None otherwise."""
    steps = {(fid, id(code)): line for fid, code, line in step_stack}
    for i, (fid, code, line) in enumerate(stack):
        step_line = steps.get((fid, id(code)))
        if step_line is None:
            continue
        tree = tree_of(code.co_filename)
        # one call line holding both: the loop is in a library below it (a trainer's fit())
        loop = None if tree is None or line == step_line else _loop_over(tree, line, step_line)
        if loop is None and line != step_line:
            return None
        for j in range(i if loop is not None else i - 1, -1, -1):  # outer frames first
            c, at = stack[j][1], stack[j][2]
            t = tree if j == i else tree_of(c.co_filename)
            low = loop.lineno if j == i and loop is not None else c.co_firstlineno
            hit = None if t is None else _innermost_if(t, at, low)
            if hit is not None:
                return Site(c.co_filename, hit, c.co_name)
        return None
    return None


def _loop_over(tree: ast.AST, a: int, b: int) -> ast.For | ast.While | None:
    """The innermost loop whose body holds both lines ``a`` and ``b``."""
    best = None
    for n in ast.walk(tree):
        if isinstance(n, (ast.For, ast.While)) and n.body:
            first, last = n.body[0].lineno, n.body[-1].end_lineno or n.body[-1].lineno
            if first <= a <= last and first <= b <= last and (best is None or
                                                              n.lineno > best.lineno):
                best = n
    return best


def _innermost_if(tree: ast.AST, line: int, low: int) -> int | None:
    """The line of the innermost ``if`` below line ``low`` whose body or ``else`` holds
    ``line``."""
    best = None
    for n in ast.walk(tree):
        if isinstance(n, ast.If) and low < n.lineno <= line:
            for arm in (n.body, n.orelse):
                if arm and arm[0].lineno <= line <= (arm[-1].end_lineno or arm[-1].lineno):
                    if best is None or n.lineno > best:
                        best = n.lineno
    return best
