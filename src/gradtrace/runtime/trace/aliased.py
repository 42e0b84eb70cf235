"""Two parameter objects over one storage in one optimizer: every step moves it twice.

# NOTE [aliased parameters]
An optimizer tells parameters apart by identity. Two distinct ``Parameter`` objects that
view the same memory (``load_state_dict(src.state_dict(), assign=True)`` of a model whose
two modules share one weight wraps each name's detached view of it in a Parameter of its
own; a tie written as ``dec.weight.data = enc.weight.data``) are two entries: each gets its
own gradient, and each step updates the shared values twice, with two sets of optimizer
state. Nothing fails. For SGD without weight decay (momentum included) the two updates add up
to the update of the summed gradient, which is what a real tie gets; only an optimizer whose
update is not linear in the gradient (Adam, RMSprop, ...) or that decays is reported. At
the first checked step of each optimizer the run groups its parameters by (data pointer,
shape, strides, dtype); a group of two or more distinct tensors is an alias.
The line named is where one of them was registered in place of an earlier parameter
(NOTE [replaced after the optimizer] in replaced.py), else where the optimizer was built.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import make
from gradtrace.runtime.frames import Site


def check_aliases(data: Any, rec: Any, opt: torch.optim.Optimizer,
                  name_of: Callable[[Any, torch.Tensor], str]) -> None:
    """At an optimizer's first checked step: distinct tensors it holds over one storage."""
    if isinstance(opt, torch.optim.SGD) and not any(
            g.get("weight_decay", 0) for g in opt.param_groups):
        return
    seen: dict[tuple[Any, ...], torch.Tensor] = {}
    for g in opt.param_groups:
        for p in g["params"]:
            if p.device.type == "meta" or p.numel() == 0:
                continue
            key = (p.data_ptr(), tuple(p.shape), p.stride(), p.dtype)
            other = seen.setdefault(key, p)
            if other is not p:
                rec.aliases = (name_of(data, other), name_of(data, p), _where(data, other, p))
                return


def _where(data: Any, *params: torch.Tensor) -> Site | None:
    from gradtrace.runtime.trace.modes import common_line
    from gradtrace.runtime.trace.replaced import _lookup

    for p in params:
        hit = _lookup(data, p)
        if hit is not None and hit.stack:
            _, code, line = hit.stack[0]
            inner = Site(code.co_filename, line, code.co_name)
            return inner if hit.own else common_line(hit.stack, data.step_stack or ()) or inner
    return None


def alias_findings(data: Any) -> list[Finding]:
    """NOTE [aliased parameters]."""
    from gradtrace.runtime.trace.opt_state import built_line

    out: list[Finding] = []
    for rec in list(data.optimizers.values()):
        if rec.aliases is None:
            continue
        first, second, where = rec.aliases
        built = built_line(data, rec)
        related: list[tuple[Site | None, str]] = [(rec.site, "the optimizer steps here")]
        if where is not None and built is not None:
            related.append((built, "the optimizer holding both is built here"))
        out.append(make("GT872", where or built,
                        f"{first} and {second} are two parameters over the same memory"
                        f"{' since this line registered one of them' if where else ''}; the "
                        "optimizer holds both, so each step updates those values twice (two "
                        "gradients, two sets of optimizer state) instead of once with the "
                        "summed gradient of a tie",
                        fix="tie by sharing the Parameter object (`b.weight = a.weight`), "
                            "load without assign=True, or re-tie after loading",
                        related=related, severity="warning"))
    return out
