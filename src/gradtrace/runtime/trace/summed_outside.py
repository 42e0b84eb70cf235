"""Gradients summed over many steps outside the optimizer that cleared its own, then applied.

# NOTE [gradients summed outside the optimizer]
Training only part of a model by handing just that part to the optimizer
(``SGD(model[-1].parameters())``) without ``requires_grad=False`` on the rest: every
``backward()`` still writes the other parameters' ``.grad``, and that optimizer's
``zero_grad()`` clears only the parameters it holds, so the rest keep summing. When a later
optimizer takes them (the whole model fine-tuned), its first ``step()`` applies the sum of every
backward() since: one huge update.

Seen at the first step of an optimizer (one check per optimizer, its parameter list walked
once): parameters it holds that no optimizer ever stepped with a gradient, whose ``.grad`` was
added into in place at least twice (the autograd accumulation bumps the gradient's version once
per backward() after the first; ``zero_grad()`` with ``set_to_none`` drops it), no gradient
clearing seen since the previous step (a ``zero_grad(set_to_none=False)`` before the first
backward() would bump the version too), and the optimizer was built after another one, holding
none of them, had stepped at least twice (the training that summed them; an accumulation on
purpose sums into the parameters of an optimizer that already exists; the other may be gone,
rebound to the new one). The new optimizer must also hold a parameter some optimizer already
stepped with a gradient (the head: part of a model trained already): a new model built by a
second run of the same training code holds none, and the version alone does not count
backward() calls there (a recurrent cell's gradient is summed in place within one backward).
The line named is where that other optimizer was built: its parameter list is what left them
out of the clearing.
"""
from __future__ import annotations

from typing import Any

from gradtrace.findings import Finding

_MIN_SUMS = 2  # in-place additions into .grad: three backward() calls summed


def note_summed(data: Any, state: Any, rec: Any, opt: Any) -> None:
    """From the first step pre-hook of ``opt`` (before ``had_grad`` learns its gradients)."""
    ev = data.opt_built.get(id(opt))
    if state.zero_seen or ev is None or ev.ref() is not opt or ev.before < 2:
        return
    others = [r for r in list(data.optimizers.values()) if r is not rec and r.steps >= 2]
    if not others:
        return
    summed, most, shared = [], 0, False
    for group in opt.param_groups:
        for p in group["params"]:
            r = data.had_grad.get(id(p))
            if r is not None and r() is p:
                shared = True  # stepped with a gradient before: part of a model trained already
                continue
            g = p.grad
            if g is None or g.is_sparse or g.is_inference() or g._version < _MIN_SUMS:
                continue
            summed.append(p)
            most = max(most, g._version + 1)
    if not summed:
        return
    if not shared:
        return  # a new model: nothing of it was stepped before (a second run of a script)
    ids = {id(p) for p in summed}
    for other in sorted(others, key=lambda r: r.ref() is None):  # live ones first
        o = other.ref()
        if o is None or not any(id(p) in ids for g in o.param_groups for p in g["params"]):
            rec.summed = (summed[:3], len(summed), most, other)
            return


def summed_findings(data: Any, rec: Any, param_name: Any) -> list[Finding]:
    """NOTE [gradients summed outside the optimizer], for one optimizer's record."""
    if rec.summed is None:
        return []
    from gradtrace.runtime.build import code_for, make
    from gradtrace.runtime.trace.wiring import built_at, optimizer_built_at

    params, n, most, other = rec.summed
    o = other.ref()
    site = optimizer_built_at(data, other, o) if o is not None else built_at(other.site)
    if site is None:
        return []
    names = ", ".join(param_name(data, p) for p in params) + (" and more" if n > 3 else "")
    return [make(code_for("zero-grad-missing", "GT823"), site,
                 f"this optimizer holds only part of the model: {names} still require grad, "
                 "so every backward() adds into their .grad, and its zero_grad() never clears "
                 f"them; the optimizer that takes them later applies the sum of up to {most} "
                 "backward() calls at its first step",
                 fix="freeze the parameters this optimizer leaves out (requires_grad_(False)), "
                     "or clear every gradient (model.zero_grad()) before the new optimizer's "
                     "first backward()",
                 related=[(optimizer_built_at(data, rec, rec.ref()) if rec.ref() is not None
                           else None, "this optimizer applies the summed gradients")],
                 severity="warning")]


__all__ = ["note_summed", "summed_findings"]
