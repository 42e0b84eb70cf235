"""One layer object registered at several positions of a container that lists distinct layers.

# NOTE [one layer at several positions]
``nn.Sequential(*[nn.Linear(100, 100), nn.ReLU()] * 10)``, ``nn.ModuleList([block] * n)``,
``nn.ModuleList([layer for _ in range(n)])``, the same block appended twice: the container holds
one object at several positions, so the "n layers" share one weight and ``model.parameters()``
lists it once. Nothing fails; the model is just much smaller than it looks. torch's global
module registration hook sees every ``add_module`` a container makes, with the user line that
built or extended it; a parameterised layer registered at a second position of the same
``Sequential`` or ``ModuleList`` is noted there (a parameter-free layer such as ``nn.ReLU()``
shared that way is harmless and ignored). Weight tying on purpose shares a Parameter between two
different layers, or calls one layer several times in ``forward``: neither puts one layer object
at two positions of a container, so neither is noted. The finding is made when the session ends,
only when the shared layer got gradients from a backward() and an optimizer stepped.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import make
from gradtrace.runtime.frames import Site

_CONTAINERS = (torch.nn.Sequential, torch.nn.ModuleList)


@dataclass
class Shared:
    """A layer object held at several positions of one container."""

    container: weakref.ref[torch.nn.Module]
    layer: weakref.ref[torch.nn.Module]
    site: Site | None
    names: list[str] = field(default_factory=list)


def note_shared(shared: dict[tuple[int, int], Shared], container: Any, name: str, value: Any,
                site: Any) -> None:
    """From the registration hook: ``container`` registers ``value`` under ``name``; note it
    when the same parameterised layer already sits at another position. ``site`` is a callable
    returning the user line (read only when something is noted)."""
    if not isinstance(container, _CONTAINERS) or len(shared) >= 256:
        return
    others = [k for k, v in container._modules.items() if v is value and k != name]
    if not others or next(value.parameters(), None) is None:
        return
    key = (id(container), id(value))
    rec = shared.get(key)
    if rec is None or rec.container() is not container or rec.layer() is not value:
        rec = shared[key] = Shared(weakref.ref(container), weakref.ref(value), site(), others)
    if name not in rec.names:
        rec.names.append(name)


def shared_findings(shared: dict[tuple[int, int], Shared], stepped: bool) -> list[Finding]:
    """NOTE [one layer at several positions]: one finding per container and layer."""
    if not stepped:
        return []
    out: list[Finding] = []
    for rec in list(shared.values()):
        container, layer = rec.container(), rec.layer()
        if container is None or layer is None or len(rec.names) < 2:
            continue
        if not any(p.grad is not None for p in layer.parameters()):
            continue
        where = ", ".join(rec.names[:8]) + (" ..." if len(rec.names) > 8 else "")
        kind = type(container).__name__
        n = len(rec.names)
        out.append(make("GT843", rec.site,
                        f"one {type(layer).__name__} object is registered at {n} positions of "
                        f"this {kind} ({where}): the {n} layers it seems to hold share one "
                        "set of weights (model.parameters() lists it once)",
                        fix="build a new layer for each position (a list comprehension that "
                            "calls the constructor, or copy.deepcopy), not `[layer] * n`",
                        severity="warning"))
    return out
