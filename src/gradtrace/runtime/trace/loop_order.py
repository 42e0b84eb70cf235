"""Loop order seen at run time: gradients cleared before any optimizer step used them.

# NOTE [discarded gradients]
The tracer notes, when a backward() starts, what happened to the gradients of the backward()
before it (``TraceState._before_backward``): an optimizer step ran in between (that line's
gradients are *used*; with the number of backward() calls the step summed), or ``zero_grad()``
/ ``p.grad = None`` / ``grad.zero_()`` cleared them with no step in between (*discarded*: the
clearing line, that backward()'s line, how many backward() calls it threw away, the ids of
the tensors cleared). A discard is reported only for a backward() line whose gradients a step
also used at another pass: the same training backward() sometimes reaches a step and sometimes
not. A backward() whose gradients are never meant for a step (saliency, a gradient metric,
an evaluation pass) is never used by one and stays silent; so does true gradient accumulation
(several backward() calls, then one step, then zero_grad()). The line that leads:

- a step that summed several backward() calls (accumulation works) and a ``zero_grad()``
  elsewhere that drops a partial sum (at the start of an epoch): that ``zero_grad()``;
- one backward() per step, ``zero_grad()`` every pass and ``step()`` inside the same loop but
  only on some passes (an accumulation branch): the ``zero_grad()``, which belongs after the
  step;
- one backward() per step and ``step()`` outside the loop where ``zero_grad()`` and backward()
  run (once per epoch): the ``step()``.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make, src
from gradtrace.runtime.frames import Site

KIND = "gradients-cleared-before-step"


def _owner(data: Any, ids: set[int]) -> Any:
    """The optimizer record whose parameters (or their gradients) were cleared."""
    recs = [r for r in list(data.optimizers.values()) if r.steps]
    for rec in recs:
        opt = rec.ref()
        if opt is None:
            continue
        for group in opt.param_groups:
            for p in group["params"]:
                if id(p) in ids or (p.grad is not None and id(p.grad) in ids):
                    return rec
    return recs[0] if len(recs) == 1 else None


def _same_loop(a: Site, b: Site) -> bool:
    from gradtrace.runtime.trace.locate import enclosing_loop

    if a.path != b.path or a.function != b.function:
        return True  # the step sits in a helper: where it runs from is not known here
    return enclosing_loop(a) is enclosing_loop(b)


def discarded_findings(state: Any, data: Any) -> list[Finding]:
    """NOTE [discarded gradients]."""
    used = dict(state.consumed_sites)
    if state.backward_sites and not state.fresh_grads:
        last = state.backward_sites[-1]
        used[last] = max(used.get(last, 0), state.fresh_count)
    events = [e for e in state.discards if e[1] is not None and e[1] in used]
    if not events:
        return []
    zero, backward = Counter((e[0], e[1]) for e in events).most_common(1)[0][0]
    mine = [e for e in events if (e[0], e[1]) == (zero, backward)]
    lost = sum(e[2] for e in mine)
    rec = _owner(data, mine[0][3])
    if rec is None or rec.site is None:
        return []
    step = rec.site
    related = [(backward, "the gradients of this backward() were cleared unused"),
               (step, "the optimizer steps here")]
    times = f"{len(mine)} time(s)" if len(mine) > 1 else "once"
    if used[backward] > 1:
        return [make(code_for(KIND, "GT827"), zero,
                     f"zero_grad() here cleared gradients that {lost} backward() call(s) at "
                     f"{src(backward)} had accumulated before any optimizer.step() used them "
                     f"({times}); the steps ({src(step)}) sum several backward() calls, so these "
                     "batches are lost", fix="clear gradients only right after the step that "
                     "used them (or step on the partial sum first)", related=related,
                     severity="warning")]
    if _same_loop(step, zero):
        return [make(code_for("zero-grad-every-accumulation-step", "GT827"), zero,
                     f"zero_grad() here runs on every pass while optimizer.step() "
                     f"({src(step)}) runs only on some: it cleared the gradients of {lost} "
                     "backward() call(s) before a step used them, so each step applies the "
                     "last batch's gradient alone", fix="call zero_grad() right after "
                     "optimizer.step(), in the same branch", related=related,
                     severity="warning")]
    return [make(code_for(KIND, "GT827"), step,
                 f"optimizer.step() here runs outside the loop where zero_grad() "
                 f"({src(zero)}) and backward() ({src(backward)}) run: zero_grad() cleared the "
                 f"gradients of {lost} backward() call(s) before any step used them, so each "
                 "step applies the last batch's gradient alone",
                 fix="move optimizer.step() into the loop, right after backward()",
                 related=[(zero, "the gradients are cleared here, unused"),
                          (backward, "backward() runs here")], severity="warning")]
