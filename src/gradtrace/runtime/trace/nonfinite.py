"""Non-finite gradients that raised nothing: the op whose backward made them (NOTE [NaN origin])
or the `torch.where` whose unselected branch held inf/NaN; reported when tracing ends."""
from __future__ import annotations

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import make, src
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.hooks import HookState, param_name
from gradtrace.runtime.trace.state import TraceState


def nonfinite_findings(state: TraceState, data: HookState) -> list[Finding]:
    """The `where` finding if there is one, else the op where the NaN was born."""
    return _where_nan(state, data) or _nan_origin(state, data) or _blown_up(state)


def _blown_up(state: TraceState) -> list[Finding]:
    """NOTE [gradient blown up] in nan_origin.py: the op whose backward multiplied the
    gradient's size by 1e8 or more, a leaf's gradient ending up that large (no NaN)."""
    if state.blowup is None or state.nan_origin is not None:
        return []
    site, op, name, before, size = state.blowup
    return [make("GT893", site, f"{name} got a gradient of size {size:.1e}: the backward of "
                 f"`{op}` here receives a gradient of size {before:.1e} and passes on "
                 f"{size:.1e}, so its derivative is huge at this input (a norm of an all-zero "
                 "vector divided by a tiny eps, a division by an eps-sized value); nothing is "
                 "NaN, but the update is driven by this one op (plain SGD moves those weights "
                 "by the learning rate times that size)",
                 fix="keep the op's input away from where its derivative explodes (a larger "
                     "eps, mask the degenerate rows before the op), or clip the gradients",
                 severity="warning")]


NAN_FIX = ("keep the op's input away from where its derivative is infinite (e.g. "
            "acos(x.clamp(-1 + 1e-7, 1 - 1e-7)), sqrt(x + 1e-12), a norm with eps), or mask "
            "the input before the op instead of its output after")


RECEIVED = "received:"  # nan_origin._receiver_site's op prefix
from gradtrace.runtime.trace.saturated import SATURATED  # noqa: E402


def nan_text(op: str) -> str:
    if op.startswith(SATURATED):  # NOTE [log of a saturated sigmoid]
        return (f"this sigmoid's output rounds to exactly 0.0 or 1.0 (float32 saturation), a "
                f"log of it (or of 1 minus it) is -inf, and the backward of "
                f"`{op[len(SATURATED):]}` then passes on NaN/Inf")
    if op.startswith(RECEIVED):  # NOTE [NaN born in a library op]
        return (f"the backward of `{op[len(RECEIVED):]}`, inside a library call, sends a "
                "NaN/Inf gradient to the tensor made here (its derivative is infinite or "
                "undefined at this value: a probability that underflowed to 0, a log of 0)")
    return (f"the backward of `{op}` here receives a finite gradient and passes on NaN/Inf: "
            "its derivative is infinite or undefined at this input")


def _nan_origin(state: TraceState, data: HookState) -> list[Finding]:
    """A leaf got a non-finite gradient born in the backward of one op (NOTE [NaN origin]) and
    no optimizer step reported it (that case is reported with the step)."""
    if state.nan_origin is None or any(r.nonfinite is not None for r in data.optimizers.values()):
        return []
    site, op, name = state.nan_origin
    return [make("GT825", site, f"{name} got a non-finite gradient (NaN/Inf): " + nan_text(op),
                 fix=NAN_FIX, severity="warning")]


def forward_origin(state: TraceState, name: str, step: int, site: Site | None) -> Finding | None:
    """GT825 at the forward op that made the loss NaN (NOTE [forward NaN origin]), if the first
    backward()'s loss was non-finite and the first forward showed where."""
    if state.fwd_nan is None or not state.loss_nonfinite:
        return None
    at, op, own = state.fwd_nan
    return make("GT825", at, f"non-finite gradient (NaN/Inf) first seen in {name} at optimizer "
                f"step {step}: the loss was already NaN, made in the forward pass by `{op}`" + (
                    f" ({src(own)}) from the inf made here" if own != at
                    else " here, from finite inputs"),
                fix="keep the op's inputs in its domain (an eps in std/norm divisions, masks "
                    "applied before softmax, not after)",
                related=[(own if own != at else None, "the NaN appears here"),
                         (site, "the NaN gradient reached optimizer.step() here")],
                severity="warning")


def _where_nan(state: TraceState, data: HookState) -> list[Finding]:
    """A `torch.where` branch held inf/NaN and a leaf it was computed from got a non-finite
    gradient (no optimizer step saw it: that case is reported with the step)."""
    if any(r.nonfinite is not None for r in data.optimizers.values()):
        return []
    for (kind, site, _), c in state.events.items():
        if kind != "where-nonfinite":
            continue
        with torch.no_grad():
            bad = [t for t in (r() for r in c.extra.get("leaves", ())) if t is not None
                   and t.grad is not None and not bool(torch.isfinite(t.grad).all())]
        if bad:
            return [make("GT825", site, f"{param_name(data, bad[0])} got a non-finite gradient "
                         "(NaN/Inf): a branch of this `torch.where` holds inf/NaN, and its "
                         "gradient is NaN even where it is not selected (0 * inf)",
                         fix="make both branches finite: compute the risky one on safe inputs "
                             "(e.g. torch.where(x > 0, x, 1.0) inside sqrt/log)",
                         severity="warning")]
    return []


def nan_loss_findings(state: TraceState, data: HookState) -> list[Finding]:
    """# NOTE [NaN loss, finite gradients]
    A NaN made in the forward pass does not always reach a gradient: ``0 * -inf`` where a
    teacher's probability is 0 and the student's log-probability of a padded column is -inf
    (the mul's backward never uses the side that does not require grad), a NaN in a term whose
    gradient is masked. The loss value is NaN, so every logged or compared loss is NaN, while
    the parameters train on finite gradients: nothing fails. Reported at the forward op that
    made the NaN (NOTE [forward NaN origin]) when the first backward()'s loss was non-finite, an
    optimizer stepped and no step saw a non-finite gradient (that case is GT825's); listed after every
    other silent finding (a NaN loss is a symptom another finding may explain)."""
    recs = data.optimizers.values()
    if state.fwd_nan is None or not state.loss_nonfinite or state.nan_origin is not None or any(
            r.nonfinite is not None for r in recs) or not any(r.steps for r in recs):
        return []  # (no optimizer stepped: no training goes on with the NaN loss)
    at, op, own = state.fwd_nan
    return [make("GT862", at, f"the loss of backward() is NaN, made in the forward pass by "
                 f"`{op}`" + (f" ({src(own)}) from the inf made here" if own != at else
                              " here, from inputs without NaN") +
                 ": no non-finite gradient reached an optimizer step, so training goes on "
                 "while every loss value logged or compared is NaN",
                 fix="keep the op's inputs finite where the result is used (mask the -inf "
                     "entries before multiplying, e.g. torch.where(p > 0, p * log_q, 0), or an "
                     "eps in a division)",
                 related=[(own if own != at else None, "the NaN appears here")],
                 severity="warning")]
