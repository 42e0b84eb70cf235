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
meant to be frozen. When the optimizer's parameter groups are spelled out part by part (two or
more groups, each the parameters of one submodule: ``[{'params': self.mvsnet.parameters()},
{'params': self.refine.parameters()}]``, 3DVNet), the program chose there which parts train:
the line is the ``<...>.<part>.parameters()`` of the group holding the module's parameters
(read in the files that ran, one such call only), where the part meant to be fixed is handed
to the optimizer. Freezing BatchNorm statistics on purpose (``bn.eval()`` in a trained
backbone) changes the layer and is left alone; so is a whole model left in eval mode.
"""
from __future__ import annotations

from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import make
from gradtrace.runtime.frames import Site

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
        group = _group_listed_at(data, params)
        where = ("runs in eval mode while the model around it trains (called there)" if group
                 else "runs here in eval mode while the model around it trains")
        out.append(make("GT846", group or rec.site, f"{type(m).__name__} {where}, and eval mode "
                        "changes nothing in it (no dropout or normalisation layer): it reads as "
                        "a freeze, yet its parameters get gradients and the optimizer updates "
                        "them" + ("; they are handed to the optimizer here, in a parameter "
                                  "group listed part by part" if group else ""),
                        fix="freeze it with requires_grad_(False) (and leave it out of the "
                            "optimizer), or run this call inside torch.no_grad(); a no_grad "
                            "block that only calls .eval() freezes nothing",
                        related=[(rec.site, "it runs with grad on here")] if group else [],
                        severity="warning"))
    return out


def _group_listed_at(data: Any, params: list[torch.Tensor]) -> Any:
    """The ``<...>.<part>.parameters()`` line of the parameter group holding ``params``, when
    the optimizer's groups are spelled out part by part (NOTE [eval is no freeze])."""
    import ast

    from gradtrace.runtime.trace.wiring import _files, _module_named, _walk

    ids = {id(p) for p in params}
    for rec in list(data.optimizers.values()):
        opt = rec.ref()
        if opt is None or not rec.steps or len(opt.param_groups) < 2:
            continue
        groups = [{id(p) for p in g["params"]} for g in opt.param_groups]
        mine = [g for g in groups if ids <= g]
        if not mine:
            continue
        names = [_module_named(data, g) for g in groups]
        if not all(names):
            return None
        name = names[groups.index(mine[0])]
        hits = [(path, n.lineno) for path in _files(data) for n in _walk(path)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr == "parameters" and isinstance(n.func.value, ast.Attribute)
                and n.func.value.attr == name]
        return Site(*hits[0]) if len(hits) == 1 else None
    return None
