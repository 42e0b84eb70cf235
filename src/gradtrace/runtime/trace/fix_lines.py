"""The statement to change, for silent findings whose symptom shows elsewhere (issue 13 §2):
a trainable module called inside a no-grad block kept for a frozen one, the step of an
optimizer other than the one holding what the loss trains, the op whose derivative is zero
everywhere on the loss's path when no step changes anything."""
from __future__ import annotations

from typing import TYPE_CHECKING

from gradtrace.runtime.build import src
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.opt_state import built_site

# backward nodes of the ops whose derivative is zero wherever it is defined
ZERO_DERIVATIVE = frozenset({"RoundBackward0", "RoundBackward1", "SignBackward0",
                             "FloorBackward0", "CeilBackward0", "TruncBackward0",
                             "SgnBackward0"})

if TYPE_CHECKING:
    from torch import Tensor

    from gradtrace.runtime.trace.hooks import HookState, ModuleRecord


def frozen_beside(data: HookState, rec: ModuleRecord) -> Site | None:
    """# NOTE [no_grad kept for a frozen module]
    Where a module whose own parameters are all frozen ran under the same no-grad switch as
    ``rec`` (a trainable module that only ran with grad off), or None. Such a block is there on
    purpose, for the frozen module (a frozen encoder, then a trainable head inside the same
    ``with torch.no_grad():``): the statement to change is the trainable module's call, which
    belongs after the block. A block with no frozen module in it is the mistake itself and
    stays the finding's line. So does a block whose statement that ran the trainable module
    also ran a frozen one (``rec.nograd_stmt``, the line the frame holding the switch was
    running): LoRA layers patched into a frozen text encoder run inside its forward (sd-scripts'
    SD3 ``encode_tokens``), and a model with a frozen backbone runs both in one call; no call
    can be moved out of the block, which is the line to change
    (NOTE [block of one statement])."""
    off = rec.nograd_site
    if off is None:
        return None
    kept = None
    for r in list(data.modules.values()):
        m = r.ref()
        if r is rec or m is None or r.nograd_site != off or r.grad_runs or r.site is None:
            continue
        own = [p for p in m._parameters.values() if p is not None]
        if own and not any(p.requires_grad for p in own):
            if rec.nograd_stmt is not None and r.nograd_stmt == rec.nograd_stmt:
                return None
            kept = kept or r.site
    return kept


def other_stepped(data: HookState, missed: list[Tensor]
                   ) -> tuple[Site, str, str] | None:
    """# NOTE [the other optimizer stepped]
    (site, why, fix) when the parameters that got gradients are held by an optimizer the
    program built and never stepped, while exactly one other optimizer steps: the step call
    names the wrong optimizer (``optimizer2.step()`` where ``optimizer1`` holds what the loss
    trains), and that call is the line to change. None otherwise."""
    steppers = [r for r in list(data.optimizers.values()) if r.steps and r.ref() is not None]
    if len(steppers) != 1 or steppers[0].site is None:
        return None
    ids = {id(p) for p in missed}
    for built in list(data.opt_built.values()):
        opt = built.ref()
        rec = data.optimizers.get(id(opt)) if opt is not None else None
        if opt is None or (rec is not None and rec.ref() is opt and rec.steps):
            continue
        held = {id(p) for g in opt.param_groups for p in g["params"]}
        if ids <= held:
            made = built_site(built)
            where = f" (built at line {made.line}: {src(made)})" if made else ""
            return (steppers[0].site, f"the optimizer that holds them{where} is never "
                    "stepped, and the step here is another optimizer's",
                    "step the optimizer that holds these parameters here")
    return None


def zero_gradient_op(zero_ops: list[tuple[Site, str]], opt: object
                     ) -> tuple[Site, str] | None:
    """The first zero-derivative op of the loss when every gradient the optimizer holds is
    exactly zero and its learning rate is not (NOTE [zero-derivative ops]); else None."""
    import torch

    if not zero_ops or opt is None:
        return None
    groups = getattr(opt, "param_groups", [])
    grads = [p.grad for g in groups for p in g["params"] if p.grad is not None]
    if not grads or not all(g.get("lr", 1) for g in groups) or \
            any(bool(torch.count_nonzero(g)) for g in grads):
        return None
    return zero_ops[0]
