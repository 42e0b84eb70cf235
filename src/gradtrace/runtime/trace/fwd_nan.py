"""Where a NaN is born in the forward pass, for a loss that came out non-finite.

# NOTE [forward NaN origin]
NOTE [NaN origin] finds the op whose *backward* turns finite gradients into NaN. A NaN made in
the forward (the ``std`` of one frame, ``(x - mean) / std`` of constant advantages, an
attention map filled with ``-inf`` after its softmax and multiplied on) makes the loss NaN and
every gradient with it; the hunt then names nothing useful and GT825 fell back to the step.
From the tracer's entry until the first backward() starts (the first forward pass only, so the
cost is one step's worth of ``isfinite`` reductions), every floating-point output of a recorded
call is checked:

- an output holding inf (no NaN) from finite inputs: where that inf was made is remembered
  (weakly, 64 at most): a ``masked_fill(..., -inf)``, ``torch.full(-inf)``, ``log(0)``;
- the first output holding NaN from inputs without NaN is the origin: its line, or, when one of
  its inputs is itself a remembered inf (the filled tensor multiplied on directly), the line
  that made that inf. An inf that went through another op first (a ``log_softmax`` of masked
  logits) is the intended mask, and the op that met it is named.

The origin is used only when the first backward()'s loss is non-finite (a NaN made in a branch
that is masked out later changes nothing) and a non-finite gradient then reached a step.

# NOTE [NaN made under no_grad]
A NaN made while grad mode is off (a target computed under ``no_grad``: SAC's value targets
from the policy's log-probabilities) is in no graph, so no backward() shows where it went, and
the first backward() is often another optimizer's (the Q network's, on finite targets). Such an
origin is kept through the first 8 backward()s (one iteration of several optimizers, before a
divergence could make its own NaN): the first of them whose loss is non-finite uses it. An
origin made with grad on keeps the first-backward rule (its graph is in the first loss).
"""
from __future__ import annotations

import weakref
from typing import Any

import torch

from gradtrace.runtime.frames import raw_site
from gradtrace.runtime.trace.classify import call_name
from gradtrace.runtime.trace.saturated import saturated_log_input, saturated_under

Tensor = torch.Tensor
_isfinite, _isnan = torch.isfinite, torch.isnan
_PLAIN = (Tensor, torch.nn.Parameter)


def _floats(args: Any) -> list[Tensor]:
    out = []
    for a in args:
        if isinstance(a, Tensor):
            if type(a) in _PLAIN and a.is_floating_point() and a.numel():
                out.append(a)
        elif isinstance(a, (list, tuple)) and len(a) < 16:
            out.extend(t for t in a if type(t) in _PLAIN and t.is_floating_point()
                       and t.numel())
    return out


def _finite(t: Tensor) -> bool:
    return bool(_isfinite(t.detach()).all())


def _has_nan(t: Tensor) -> bool:
    return bool(_isnan(t.detach()).any())


def check_output(state: Any, func: Any, args: Any, out: Any) -> None:
    """Check one recorded call's output (see the NOTE); DisableTorchFunction is on. The checks
    run under no_grad on detached tensors: nothing is recorded into the user's graph, nor saved
    (a non-reentrant checkpoint counts the tensors its forward saves)."""
    if type(out) is not Tensor or not out.is_floating_point() or not out.numel() \
            or out.is_sparse or out.device.type == "meta":
        return  # (a subclass such as DTensor may communicate in a reduction: left alone)
    grad_on = torch.is_grad_enabled()
    with torch.no_grad():
        if _finite(out):
            return
        floats = _floats(args)
        name = call_name(func)
        if not floats and "empty" in name:
            return  # uninitialised memory, not a computation
        bad = [a for a in floats if not _finite(a)]
        nan = _has_nan(out)
        if nan and not floats:
            return  # a factory: only a computation from inputs is an origin
        raw = raw_site()
        site = state.site(raw) if raw is not None else None
        if not bad:
            if not nan:
                if len(state.fwd_inf) < 64:  # NOTE [log of a saturated sigmoid]
                    state.fwd_inf[id(out)] = (weakref.ref(out),
                                              saturated_log_input(name, args) or site)
                return
        elif not nan or any(_has_nan(a) for a in bad):
            return
        made = None
        for a in bad:
            hit = state.fwd_inf.get(id(a))
            if hit is not None and hit[0]() is a:
                made = hit[1]
                break
        made = made or saturated_under(bad)  # NOTE [log of a saturated sigmoid]
    state.fwd_nan = (made or site, name, site)
    state.fwd_nan_nograd = not grad_on
    state.fwd_hunt = False
    state.fwd_inf.clear()


def loss_checked(state: Any, roots: Any) -> None:
    """At the first backward(): stop hunting; note whether its loss is non-finite (at a later
    one too, for an origin made under no_grad: NOTE [NaN made under no_grad])."""
    state.fwd_hunt = False
    state.fwd_inf.clear()
    if state.fwd_nan is None or len(roots) != 1 or not isinstance(roots[0], Tensor):
        return
    with torch._C.DisableTorchFunction():
        with torch.no_grad():
            state.loss_nonfinite = not _finite(roots[0])
