"""NaN that comes with the data: the model's input already held NaN.

# NOTE [NaN in the model's input]
A NaN in the *data* (a failed radar scan left as NaN, a missing feature never filled, a
``nan_to_num`` applied only to a copy) makes the model's output, the loss and every gradient
NaN on the step of the batch holding it. NOTE [NaN origin] then finds the first backward op
that passes NaN on (a ``log_softmax`` inside the loss) and NOTE [forward NaN origin] looks
only at the first forward and only for a NaN made from inputs without NaN: the run named the
loss's line, a consumer. The line to change is where the program took the batch in.

On armed steps (NOTE [trace arming]) with grad on, the global forward pre-hook checks the
floating-point tensor arguments that do not require grad (data, not another model's output) of
a module called from user code that is not a ``forward`` (the model's call in the training
step, not a layer inside a model): one ``isnan(...).any()`` per such argument per call. The
check stops once a non-finite gradient has been seen. An input holding NaN is kept only when
that call's output holds NaN too (a one-shot forward hook on the model; a model that masks or
fills missing values itself is left alone), the last one with where the program bound it to
a name of its own (the frame walk of :func:`hook_input._made_at`: ``input_sequence, target =
batch``; a loader's ``for`` target) and the model's call.

It is used only when the first non-finite gradient reaches a step, that input came after the
last step whose gradients were checked finite, and the model's parameters were still finite
then (a model already holding NaN makes NaN of anything): GT825 names the binding (the call
when the input has no name), before the backward hunt's op and after a NaN the first forward
saw made from finite inputs (NOTE [forward NaN origin]: ``x.std(0)`` of one sample, the NaN's
own op, then handed to the model).
"""
from __future__ import annotations

import types
import weakref
from dataclasses import dataclass
from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import make
from gradtrace.runtime.frames import Site, is_internal, user_frame

Tensor = torch.Tensor


@dataclass
class InputNaN:
    steps: int  # optimizer steps ended before the call (HookState.steps)
    module: Any  # weakref to the model
    made: Site | None  # where the program bound the input
    call: Site  # the model's call
    model: str


def note_input(data: Any, module: torch.nn.Module, args: tuple) -> None:
    """From the forward pre-hook (armed, grad on): keep a model input holding NaN (the NOTE)."""
    cand = [a for a in args if type(a) is Tensor and not a.requires_grad]
    if not cand:  # (a layer's activations require grad: most calls stop here)
        return
    with torch._C.DisableTorchFunction():
        cand = [a for a in cand if a.is_floating_point() and a.numel()]
        if not cand:
            return
        f = user_frame(1)
        if f is None or f.f_code.co_name == "forward":
            return
        with torch.no_grad():
            bad = next((a for a in cand if bool(torch.isnan(a).any())), None)
    if bad is None:
        return
    from gradtrace.runtime.trace.hook_input import _made_at

    frames: list[types.FrameType] = []
    g: types.FrameType | None = f
    while g is not None and len(frames) < 64:
        if not is_internal(g.f_code):
            frames.append(g)
        g = g.f_back
    made = _made_at(bad, frames)
    call = Site(f.f_code.co_filename, f.f_lineno, f.f_code.co_name)
    rec = InputNaN(data.steps, weakref.ref(module), made, call, type(module).__name__)
    del frames, f, g
    handle: Any = None

    def after(_m: Any, _args: Any, out: Any) -> None:  # this call's output: NaN, or masked?
        handle.remove()
        if _has_nan(out):
            data.input_nan = rec

    handle = module.register_forward_hook(after)


def _has_nan(out: Any) -> bool:
    items = out.values() if isinstance(out, dict) else out if isinstance(
        out, (tuple, list)) else (out,)
    with torch._C.DisableTorchFunction(), torch.no_grad():
        return any(isinstance(t, Tensor) and t.is_floating_point() and bool(torch.isnan(t).any())
                   for t in list(items)[:16])


def confirm(data: Any) -> None:
    """At the first non-finite gradient seen by a step: keep the input only if it came after
    the last finite check and the model's parameters were finite (the NOTE)."""
    data.input_nan_closed = True
    rec = data.input_nan
    if rec is None:
        return
    module = rec.module()
    ok = module is not None and rec.steps >= data.finite_at
    if ok:
        with torch._C.DisableTorchFunction(), torch.no_grad():
            ok = all(bool(torch.isfinite(p).all()) for p in module.parameters()
                     if p.is_floating_point())
    if not ok:
        data.input_nan = None


def input_nan_finding(data: Any, name: str, step: int, site: Site | None) -> Finding | None:
    """GT825 at the binding of the model input that held NaN (the NOTE), or None."""
    rec = data.input_nan
    if rec is None:
        return None
    at = rec.made or rec.call
    return make("GT825", at, f"non-finite gradient (NaN/Inf) first seen in {name} at optimizer "
                f"step {step}: the input given to `{rec.model}` already held NaN (the data "
                "itself, taken in here) while its parameters were finite, so its output, the "
                "loss and every gradient are NaN",
                fix="fill or mask the NaN values of the data before the model sees them "
                    "(torch.nan_to_num, a validity mask), or skip the samples holding NaN",
                related=[(rec.call if rec.call != at else None, "the model is given it here"),
                         (site, "the NaN gradient reached optimizer.step() here")],
                severity="warning")
