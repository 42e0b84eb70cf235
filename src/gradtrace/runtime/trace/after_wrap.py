"""# NOTE [after the DDP wrap]

``DistributedDataParallel`` takes the list of parameters it all-reduces (``_module_parameters``)
and broadcasts once, in its constructor. A parameter or layer added to the wrapped model
afterwards (a helper that registers extra weights, an adapter injected into ``model.module``, a
layer replaced by a new one) is trained by the optimizer, its gradient is filled by
backward(), and nothing ever averages it over the ranks: every rank updates it from its own
shard and the replicas drift apart without any error (the rest of the model stays in sync).

Decided from the run only. The global registration hook sees ``DDP(...)`` register the module it
wraps: the user frame that called the constructor is remembered (its code object, not the
frame). Every later ``module.<name> = Parameter/Module`` remembers, for the parameters it
adds, the line of the frame running that constructor's function (the call that, directly or
through helpers, added them: where the fix moves a line above the wrap), else the registering
line itself. When tracing ends, for every live DDP that ran with grad: parameters of its module
that require grad, hold a gradient, are not among the parameters it manages nor among those it
was told to ignore (``_ddp_params_and_buffers_to_ignore``), and that no other live DDP manages
(a model wrapped again after the change is fine). Named: the registering line above; kind
``parameter-replaced-after-ddp-wrap`` (static twin GT614).
"""
from __future__ import annotations

import weakref
from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make
from gradtrace.runtime.frames import user_frame

_DDP = torch.nn.parallel.DistributedDataParallel
KIND = "parameter-replaced-after-ddp-wrap"


def note_wrap_registration(state: Any, data: Any, module: Any, name: str, value: Any) -> None:
    """From the global module/parameter registration hook: a DDP registering the module it
    wraps, or a parameter/layer added after some DDP was built (NOTE [after the DDP wrap])."""
    wraps = data.ddp_wraps
    if isinstance(module, _DDP):
        if name == "module" and len(wraps) < 16:
            f = user_frame(1)
            if f is not None:
                wraps.append((weakref.ref(module), f.f_code))
        return
    if not wraps or len(data.after_wrap) >= 4096:
        return
    if isinstance(value, torch.nn.Parameter):
        params = [value]
    elif isinstance(value, torch.nn.Module):
        params = list(value.parameters())[:256]
    else:
        return
    if not params:
        return
    site = _adding_line(state, {code for _, code in wraps})
    if site is not None:
        for p in params:
            data.after_wrap[id(p)] = (weakref.ref(p), site)


def _adding_line(state: Any, builders: set[Any]) -> Any:
    """The line, in a function that built a DDP wrapper, whose call is registering now; else
    the user's line that registers."""
    first = f = user_frame(1)
    while f is not None:
        if f.f_code in builders:
            return state.site((f.f_code, f.f_lineno, f.f_lasti))
        f = f.f_back
    return None if first is None else state.site((first.f_code, first.f_lineno, first.f_lasti))


def after_wrap_findings(data: Any) -> list[Finding]:
    """The findings of NOTE [after the DDP wrap]."""
    if not data.ddp_wraps or not data.after_wrap:
        return []
    live = [d for d in (ref() for ref, _ in data.ddp_wraps) if d is not None]
    managed = {id(p) for d in live for p in getattr(d, "_module_parameters", ())}
    out: list[Finding] = []
    for ddp in live:
        rec = data.modules.get(id(ddp))
        if rec is None or rec.ref() is not ddp or not rec.grad_runs:
            continue
        ignored = set(getattr(ddp, "parameters_to_ignore", ()))
        groups: dict[Any, list[str]] = {}
        for n, p in ddp.module.named_parameters():
            if not p.requires_grad or p.grad is None or id(p) in managed or n in ignored:
                continue
            hit = data.after_wrap.get(id(p))
            if hit is not None and hit[0]() is p:
                groups.setdefault(hit[1], []).append(n)
        for site, names in groups.items():
            shown = ", ".join(names[:3]) + (" and more" if len(names) > 3 else "")
            out.append(make(code_for(KIND, "GT880"), site,
                            f"{shown} {'was' if len(names) == 1 else 'were'} added to the model "
                            "here, after it was wrapped in DistributedDataParallel: DDP all-reduces "
                            "only the parameters that existed when it was built, so the "
                            "optimizer updates these from each rank's own gradient and the "
                            "replicas drift apart",
                            fix="add every parameter and layer before wrapping the model in "
                                "DistributedDataParallel (or wrap it again after the change)",
                            severity="warning"))
    return out


__all__ = ["after_wrap_findings", "note_wrap_registration"]
