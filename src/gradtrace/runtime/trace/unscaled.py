"""Gradient accumulation over micro-batch losses that are not divided by their number.

# NOTE [accumulated means not scaled]
Gradient accumulation runs backward() on ``k`` micro-batches before each optimizer step;
``.grad`` sums their gradients. When each micro-batch loss is a mean (``cross_entropy``,
``mse_loss``... with the default ``reduction="mean"``, or ``.mean()``) and is not divided by
``k``, each step applies ``k`` times the mean gradient of the ``k * b`` samples: the learning
rate is silently ``k`` times larger (and weight decay and clipping thresholds relatively
smaller) than the same batch in one piece. Nothing fails.

At the start of each backward() the root of the loss graph is read once per backward line:
the root node of a mean reduction (``MeanBackward``, or a loss node whose saved reduction is
``mean``) means nothing scaled the loss after it was reduced (``loss / k`` makes a
``DivBackward`` the root, ``loss * w`` a ``MulBackward``). At every optimizer step the run
notes whether the backward() calls it sums all came from one line, and how many. A backward
line whose roots are unscaled means, whose steps each summed ``k >= 2`` of its calls, and that
never made a step alone or shared a step with another backward line, and before each of whose
calls a forward pass ran (a module was called with grad on since its previous call: the
micro-batches are separate forwards, not the terms of one graph backpropagated one by one, as
RA-CNN's rank losses over the scales of one forward), and whose steps' optimizer holds a
gradient added to in place (two of the calls reached its parameters: two adapters
backpropagated one after the other, then their two optimizers stepped, is one call each) is
reported there. A loss
divided (or multiplied) before backward(), a step after every backward(), several losses
backpropagated separately into one step (a GAN's real and fake terms), a sum-reduced loss and a
closure step (LBFGS) are silent; so is a loss scaled by an enabled ``GradScaler`` (the scale
hides the division: a miss, not an alarm), and so are gradients divided after the fact: a loop
around the backward line that scales ``.grad`` in place (``p.grad /= k``,
``p.grad.data.div_(k)``, ECO's accumulation), read in the file that ran.
"""
from __future__ import annotations

from typing import Any

import ast

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.locate import enclosing_loop

_MEAN_NODES = ("MeanBackward0", "MeanBackward1")
_LINES = 32  # backward lines followed


def note_root(state: Any, roots: Any) -> None:
    """From the backward() start: whether this line's loss is an unscaled mean, and whether a
    forward pass (a module call with grad on) ran since this line's previous backward()."""
    if len(roots) != 1 or not state.backward_sites:
        return
    site = state.backward_sites[-1]
    data = state.hooks_data
    calls = data.train_calls + data.eval_calls if data is not None else 0
    entry = state.mean_roots.get(site)
    if entry is not None:
        if calls == entry[4]:  # terms of one forward pass, not micro-batches
            entry[2] += 1
        entry[4] = calls
        return
    if len(state.mean_roots) >= _LINES:
        return
    gf = getattr(roots[0], "grad_fn", None)
    mean = gf is not None and (type(gf).__name__ in _MEAN_NODES
                               or getattr(gf, "_saved_reduction", None) == 1)
    # unscaled mean, steps summing k >= 2 of its calls alone, other steps or calls, k, the
    # module calls counted at its last backward()
    state.mean_roots[site] = [mean, 0, 0, 0, calls]


def note_window(state: Any, count: int, opt: Any = None) -> None:
    """From the step pre-hook: the lines of the backward() calls this step sums (of the
    ``count`` calls since the last step; ``autograd.grad`` calls, which leave ``.grad`` alone
    and are not followed here, are left out)."""
    if count < 1 or not state.mean_roots or count > len(state.backward_sites):
        return
    calls = [s for s in state.backward_sites[-count:] if s in state.mean_roots]
    lines = set(calls)
    for line in lines:
        entry = state.mean_roots[line]
        if len(lines) == 1 and len(calls) >= 2 and _summed_into(opt):
            entry[1] += 1
            entry[3] = max(entry[3], len(calls))
        else:
            entry[2] += 1


def _summed_into(opt: Any) -> bool:
    """Some gradient the stepping optimizer holds was added to in place since it was made: at
    least two of the window's backward() calls reached this optimizer's parameters. None of them
    when each call reached another optimizer's parameters (two adapters backpropagated, then
    their two optimizers stepped): each gradient is still the tensor one backward() made (its
    version 0). Unknown optimizer: counted."""
    if opt is None:
        return True
    import torch

    with torch._C.DisableTorchFunction():  # (not the program's `.grad` reads)
        for group in opt.param_groups:
            for p in group["params"]:
                grad = p.grad
                if grad is not None and grad._version > 0:
                    return True
    return False


def unscaled_findings(state: Any) -> list[Finding]:
    """NOTE [accumulated means not scaled]."""
    if state.closure_steps:
        return []
    out = []
    for site, (mean, multi, other, k, _) in list(state.mean_roots.items()):
        if not mean or not multi or other or _grads_scaled(site):
            continue
        out.append(make(code_for("accumulated-loss-not-scaled", "GT513"), site,
                        f"each optimizer step sums {k} backward() calls of this line "
                        f"(gradient accumulation), and the loss backpropagated here is a mean "
                        f"that is not divided by {k}: .grad holds the sum of {k} micro-batch "
                        f"mean gradients, so every step applies {k} times the mean gradient "
                        f"(as if the learning rate were {k} times larger)",
                        fix=f"backward `loss / {k}` (the number of micro-batches per step)",
                        severity="warning"))
    return out


_SCALE_OPS = (ast.Div, ast.Mult)
_SCALE_METHODS = frozenset({"div_", "mul_"})


def _is_grad(e: ast.AST) -> bool:
    """``p.grad`` or ``p.grad.data``."""
    if isinstance(e, ast.Attribute) and e.attr == "data":
        e = e.value
    return isinstance(e, ast.Attribute) and e.attr == "grad"


def _grads_scaled(site: Site) -> bool:
    """The loop around the backward line at ``site`` scales some ``.grad`` in place."""
    loop = enclosing_loop(site)
    if loop is None:
        return False
    for n in ast.walk(loop):
        if isinstance(n, ast.AugAssign) and isinstance(n.op, _SCALE_OPS) and _is_grad(n.target):
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr in _SCALE_METHODS and _is_grad(n.func.value):
            return True
    return False
