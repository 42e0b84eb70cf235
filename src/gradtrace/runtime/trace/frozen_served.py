"""A module frozen with ``requires_grad`` and then only evaluated, never put in eval mode.

# NOTE [frozen, then served in train mode]
``requires_grad_(False)`` stops gradients, not dropout. A class that freezes a pretrained part
in its constructor (poprox's ``NewsEncoder``: ``self.plm.requires_grad_(False)``) and a
program that builds it only to evaluate it (a serving component that loads a checkpoint and
embeds under ``torch.inference_mode()``, no optimizer, no backward()) leave that part in train
mode: every ``nn.Dropout`` in it drops at random, two embeddings of the same input differ and
every cached vector is a random thinning of the network. Nothing fails.
NOTE [evaluated as loaded, in train mode] covers a model held by a name of the program and
evaluated twice in a file that never sets a mode; here the freeze is the evidence that the part is meant to stay
fixed, and the line to change is the freeze (the fix puts ``.eval()`` beside it).

Run-time facts, at the first grad-off run of a dropout layer (``p > 0``) in train mode while
no optimizer exists and no backward() ran (the global pre-hook, beside
NOTE [evaluated as loaded, in train mode]): the modules whose methods run around the layer (from the stack,
innermost first) that are in train mode and hold no parameter that requires grad, up to the
largest one; that one has parameters and every one of them was frozen by a ``requires_grad``
switch the run saw. Reported when the trace ends, if still no optimizer was built and no
backward() ran, the part (when alive) is still frozen and in train mode, and the file of the
freeze never calls ``.train(...)`` (Monte-Carlo dropout turns the layers on with it on
purpose). Named: the freeze; one finding per freeze line. GT874.
"""
from __future__ import annotations

import ast
import weakref
from typing import Any

import torch

from gradtrace.runtime.frames import Site

_PARTS = 16  # frozen parts followed


def note_frozen_served(data: Any, state: Any, layer: torch.nn.Module, frame: Any) -> None:
    """From NOTE [evaluated as loaded, in train mode]'s first grad-off run of a dropout layer."""
    from gradtrace.runtime.trace.frozen_dropout import running_modules

    if len(data.frozen_served) >= _PARTS:
        return
    part = None
    for m, _ in running_modules(frame, layer):
        if not m.training or any(p.requires_grad for p in m.parameters()):
            break
        part = m
    if part is None or id(part) in data.frozen_served:
        return
    params = list(part.parameters())
    sites = [state.frozen_at(p) for p in params]
    if params and all(s is not None for s in sites):
        data.frozen_served[id(part)] = (weakref.ref(part), sites[0], type(part).__name__,
                                        type(layer).__name__)


def _sets_train(tree: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == "train" for n in ast.walk(tree))


def frozen_served_findings(data: Any, state: Any) -> list[Any]:
    """GT874 at the freeze of a part only evaluated in train mode (see the NOTE)."""
    if not data.frozen_served or data.optimizers or state.backward_count:
        return []
    from gradtrace.runtime.build import make
    from gradtrace.runtime.trace.locate import tree_of

    out: dict[Site, tuple[str, str]] = {}
    for ref, site, name, layer in list(data.frozen_served.values()):
        part = ref()  # None: gone with the object that built it
        if part is not None and (not part.training or any(
                p.requires_grad for p in part.parameters())):
            continue
        tree = tree_of(site.path)
        if tree is None or _sets_train(tree) or site in out:
            continue
        out[site] = (name, layer)
    return [make("GT874", at,
                 f"the {name} frozen here (requires_grad=False) is only evaluated (no optimizer, "
                 f"no backward()) and was never put in eval mode: freezing stops gradients, not "
                 f"dropout, so its {layer} layers drop at random at every call and two "
                 "evaluations of the same inputs differ",
                 fix="call .eval() on it beside the freeze (and again after any .train())",
                 severity="warning")
            for at, (name, layer) in out.items()]


__all__ = ["frozen_served_findings", "note_frozen_served"]
