"""A weight initialised at random and registered as a buffer: it feeds the forward and never
trains.

# NOTE [random weight kept as a buffer]
Slot Attention's ``register_buffer("slots_mu", nn.init.xavier_uniform_(torch.zeros(1, 1, d)))``:
the slot prior is drawn like a weight, by a random initialiser, but a buffer is no parameter,
so ``model.parameters()`` never hands it to the optimizer and the forward samples every slot
from the same random prior for the whole training. Nothing fails.

Run-time facts: before the first backward(), the tracer's in-place handlers (grad mode off,
where every ``nn.init`` function writes, or on a plain tensor with grad on) note each plain
tensor a random fill (``uniform_``, ``normal_``) wrote, with its version and sum after the
write, and the line of user code that asked for it; the global
buffer-registration hook notes the line that registers a noted tensor as a buffer. At the end,
when an optimizer stepped: a buffer of a module that ran with grad on, still that tensor, its
version and sum unchanged since the fill (nothing loaded or updated it: a codebook refreshed
by an EMA, a checkpoint loaded into it, is written), floating point with more than one value,
of a module that holds (itself or in its layers) a parameter an optimizer stepped (it sits
among trained weights). The line named is the registration (else the fill). A buffer made by
a factory (``torch.randn``: a codebook, a fixed basis, a noise table) is not a weight's
initialisation and is not followed. GT897.
"""
from __future__ import annotations

import weakref
from itertools import islice
from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import make
from gradtrace.runtime.frames import Site, raw_site

FILLS = frozenset({"uniform_", "normal_"})
_KEPT = 2048  # tensors followed
_PARAMS = 4096  # parameters of a module looked at


def note_fill(state: Any, name: str, args: tuple[Any, ...]) -> None:
    """From the grad-off in-place fast path: ``name`` wrote ``args[0]``."""
    if name not in FILLS or not args or type(args[0]) is not torch.Tensor or state.backward_count:
        return
    fills = state.random_fills
    t = args[0]
    if len(fills) >= _KEPT:
        for k, v in list(fills.items()):
            if v[0]() is None:
                del fills[k]
        if len(fills) >= _KEPT:
            return
    try:
        if not t.is_floating_point() or t.numel() < 2 or t.device.type == "meta":
            return
        total = float(t.sum(dtype=torch.float64))
    except RuntimeError:
        return
    raw = raw_site()
    fills[id(t)] = (weakref.ref(t), t._version, total, None if raw is None else state.site(raw),
                    None)


def note_buffer(state: Any, site: Site | None, value: Any) -> None:
    """From the global buffer-registration hook: ``value`` registered at ``site``."""
    hit = state.random_fills.get(id(value))
    if hit is not None and hit[0]() is value and site is not None:
        state.random_fills[id(value)] = (*hit[:4], site)


def _untouched(hit: Any, b: torch.Tensor) -> bool:
    if hit is None or hit[0]() is not b or b._version != hit[1]:
        return False
    try:
        return float(b.sum(dtype=torch.float64)) == hit[2]
    except RuntimeError:
        return False


def random_buffer_findings(state: Any, data: Any) -> list[Finding]:
    """GT897 (see the NOTE)."""
    fills = state.random_fills
    if not fills or not any(r.steps for r in list(data.optimizers.values())):
        return []
    held = {id(p) for r in list(data.optimizers.values()) if r.steps for o in [r.ref()]
            if o is not None for g in o.param_groups for p in g["params"]}
    out: dict[Site, list[str]] = {}
    for rec in list(data.modules.values()):
        m = rec.ref()
        if m is None or not rec.grad_runs or not m._buffers:
            continue
        if not any(id(p) in held and p.grad is not None
                   for p in islice(m.parameters(), _PARAMS)):
            continue
        for name, b in m._buffers.items():
            hit = fills.get(id(b)) if b is not None else None
            if _untouched(hit, b):
                site = hit[4] or hit[3]
                if site is not None:
                    out.setdefault(site, []).append(f"{type(m).__name__}.{name}")
    return [make("GT897", site,
                 f"{', '.join(names)} is drawn at random by a weight initialiser and "
                 "registered as a buffer: buffers are not parameters, so no optimizer ever "
                 "updates it and the forward uses its random initial values for the whole "
                 "training", fix="make it an nn.Parameter (self.x = nn.Parameter(...)) if it "
                 "should be learned", severity="warning")
            for site, names in out.items()]


__all__ = ["FILLS", "note_buffer", "note_fill", "random_buffer_findings"]
