"""A submodule switched to eval mode to freeze it, trained all the same.

# NOTE [eval is no freeze]
``with torch.no_grad(): self.ssl_proj.eval()`` and then ``self.ssl_proj(x)`` after the block
(GPT-SoVITS ``freeze_quantizer``), or ``encoder.eval()`` alone where the parameters were meant to
stay fixed: eval mode switches dropout and normalisation statistics, it freezes nothing, and a
``no_grad`` block ends with its body. The module hook counts, per module, the forwards run with
grad on in eval mode. At the end a module is reported when

- every forward it ran with grad on was in eval mode, while a module containing it ran in train
  mode (the program put this part, not the whole model, in eval mode);
- eval mode changes nothing in it: no dropout or normalisation layer inside, and no class of
  its own whose ``forward`` reads ``self.training``; so the switch can only mean "keep fixed";
- its parameters received gradients and are held by an optimizer that stepped.

The line named is where the module was first called with grad on: the call that runs the part
meant to be frozen. Freezing BatchNorm statistics on purpose (``bn.eval()`` in a trained
backbone) changes the layer and is left alone; so is a whole model left in eval mode.
"""
from __future__ import annotations

from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import make

_MODAL = (torch.nn.modules.dropout._DropoutNd, torch.nn.modules.batchnorm._NormBase,
          torch.nn.modules.instancenorm._InstanceNorm)


def _eval_changes_something(m: torch.nn.Module) -> bool:
    for sub in m.modules():
        if isinstance(sub, _MODAL):
            return True
        cls = type(sub)
        if not cls.__module__.startswith("torch."):
            fwd = getattr(cls.forward, "__code__", None)
            if fwd is None or "training" in fwd.co_names:
                return True
    return False


def eval_freeze_findings(data: Any) -> list[Finding]:
    """NOTE [eval is no freeze]."""
    held = {id(p) for rec in list(data.optimizers.values()) if rec.steps and rec.ref()
            for g in rec.ref().param_groups for p in g["params"]}
    if not held:
        return []
    recs = [r for r in list(data.modules.values()) if r.ref() is not None]
    trainers = [r.ref() for r in recs if r.trained]
    out: list[Finding] = []
    reported: list[torch.nn.Module] = []
    for rec in recs:
        m = rec.ref()
        if m is None or rec.trained or not rec.eval_runs or rec.eval_runs != rec.grad_runs:
            continue
        if any(m in set(r.modules()) for r in reported):
            continue  # inside a module already reported
        params = [p for p in m.parameters() if p.requires_grad]
        if not params or not all(id(p) in held for p in params) \
                or not any(p.grad is not None or data.graded(p) for p in params):
            continue
        if not any(t is not m and any(s is m for s in t.modules()) for t in trainers):
            continue
        if _eval_changes_something(m):
            continue
        reported.append(m)
        out.append(make("GT846", rec.site, f"{type(m).__name__} runs here in eval mode while "
                        "the model around it trains, and eval mode changes nothing in it (no "
                        "dropout or normalisation layer): it reads as a freeze, yet its "
                        "parameters get gradients and the optimizer updates them",
                        fix="freeze it with requires_grad_(False) (and leave it out of the "
                            "optimizer), or run this call inside torch.no_grad(); a no_grad "
                            "block that only calls .eval() freezes nothing",
                        severity="warning"))
    return out
