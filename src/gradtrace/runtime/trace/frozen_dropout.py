"""A frozen feature extractor left in train mode: its dropout keeps drawing random masks.

# NOTE [frozen extractor dropping]
s3prl's ``UpstreamDriver`` freezes the pretrained speech upstream with
``self.upstream.requires_grad_(False)`` and the training loop's ``model.train()`` switches every
submodule on, the frozen upstream included: its dropout layers stay active, so the "fixed"
features the downstream head learns from are a different random thinning of the upstream on
every call (and the eval-mode features the head meets later are not the ones it trained on).
Nothing fails. NOTE [probe statistics] reads the same mistake through BatchNorm statistics;
this reads it through dropout.

Run-time facts, at a train-mode run with grad on of a dropout layer (``p > 0``;
NOTE [dropout left on in evaluation] sees those runs already), its first and then the first
after each new backward(), at most four times (a freeze after a warm-up forward is still seen):

- the layer's input does not require grad: no gradient flows through the part that holds it
  (a frozen middle that the loss backpropagates through, a frozen transformer under a trained
  prompt or adapter, is left alone: its input requires grad);
- the modules whose forwards are running around the layer (read from the frames on the stack,
  innermost first) are in train mode and hold no parameter that requires grad, up to the
  largest such one (the extractor), and that one has parameters, every one of them frozen by a
  ``requires_grad`` switch the run saw (a module whose weights never required grad is not
  "frozen" on purpose);
- a module in eval mode on that path means the layer was switched back on by itself
  (Monte-Carlo dropout): left alone.

Reported when the program ends, if an optimizer applied gradients, the extractor's parameters
are all still frozen and no optimizer holds any of them (an extractor meant to stay fixed is
left out of the optimizer, as s3prl's is; frozen parameters handed to the optimizer are a
freeze for a while, or a freeze the program meant to undo: BYOL-A's ``set_trainable(True)``
that skipped every parameter, whose cause is the unfreeze): the line named is the call of the extractor in the first
user frame outside its forward (the parent's forward that runs it), where the fix puts it in
eval mode. One finding per extractor.
"""
from __future__ import annotations

import sys
import weakref
from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.frames import Site, is_internal

_LAYERS = 256  # dropout layers examined
_DEPTH = 48  # frames walked from the layer's pre-hook
_LOOKS = 4  # examinations of one layer, each after a new backward() (a freeze after a warm-up)


def note_frozen_dropout(hooks: Any, module: torch.nn.Module, args: Any) -> None:
    """From the global pre-hook, a dropout layer in train mode with grad on (see the NOTE)."""
    data = hooks.data
    seen = data.frozen_drop_seen
    count = hooks.state.backward_count
    last = seen.get(id(module))
    if last is not None and (last[0] == count or last[1] >= _LOOKS) or not getattr(
            module, "p", 0) or last is None and len(seen) >= _LAYERS:
        return
    seen[id(module)] = (count, 1 if last is None else last[1] + 1)
    x = args[0] if isinstance(args, tuple) and args else None
    if not isinstance(x, torch.Tensor) or x.requires_grad:
        return
    chain = running_modules(sys._getframe(1), module)
    extractor = None
    for m, frame in chain:
        if not m.training or any(p.requires_grad for p in m.parameters()):
            break
        extractor = (m, frame)
    if extractor is None or id(extractor[0]) in data.frozen_drops:
        return
    m, frame = extractor
    params = list(m.parameters())
    state = hooks.state
    if not params or any(state.frozen_at(p) is None for p in params):
        return
    site = _caller_site(state, frame)
    if site is not None:
        data.frozen_drops[id(m)] = (weakref.ref(m), site, type(module).__name__)


def running_modules(frame: Any, layer: torch.nn.Module) -> list[tuple[torch.nn.Module, Any]]:
    """The modules whose methods run around ``layer`` (innermost first), each with its
    outermost frame of that run."""
    out: list[tuple[torch.nn.Module, Any]] = []
    depth = 0
    while frame is not None and depth < _DEPTH:
        depth += 1
        code = frame.f_code
        if code.co_argcount and code.co_varnames[0] == "self":
            owner = frame.f_locals.get("self")
            if isinstance(owner, torch.nn.Module) and owner is not layer:
                if out and out[-1][0] is owner:
                    out[-1] = (owner, frame)
                else:
                    out.append((owner, frame))
        frame = frame.f_back
    return out


def _caller_site(state: Any, frame: Any) -> Site | None:
    """The line of the first user frame outside ``frame`` (the call of the extractor)."""
    f = frame.f_back
    while f is not None and is_internal(f.f_code):
        f = f.f_back
    return None if f is None else state.site((f.f_code, f.f_lineno, f.f_lasti))


def frozen_dropout_findings(data: Any, state: Any) -> list[Finding]:
    """GT859 for every frozen extractor that ran with its dropout active (see the NOTE)."""
    found = list(data.frozen_drops.values())
    if not found or not any(r.last_graded for r in list(data.optimizers.values()) if r.steps):
        return []
    from gradtrace.runtime.build import make

    held = {id(p) for r in list(data.optimizers.values()) for o in [r.ref()] if o is not None
            for g in o.param_groups for p in g["params"]}
    out = []
    for ref, site, layer in found:
        m = ref()
        if m is None or any(p.requires_grad or id(p) in held for p in m.parameters()):
            continue
        name = type(m).__name__
        out.append(make("GT859", site,
                        f"the {name} called here has every parameter frozen "
                        "(requires_grad=False) but runs in train mode: its "
                        f"{layer} layers keep dropping activations at random, so the frozen "
                        "features the trained layers learn from change on every call (and differ "
                        "from the eval-mode ones they meet later)",
                        fix=f"put the frozen {name} in eval mode after every model.train() "
                            "(or override train() to keep it in eval)",
                        severity="warning"))
    return out


__all__ = ["frozen_dropout_findings", "note_frozen_dropout", "running_modules"]
