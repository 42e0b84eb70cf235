"""What an optimizer step applies, checked against the gradients it finds.

# NOTE [one gradient, two steps]
A parameter held by two optimizers that both step after one ``backward()`` (CURL's encoder in
``encoder_optimizer`` and in ``cpc_optimizer``, built from the whole module's ``parameters()``)
takes two updates from one gradient: twice the step, two sets of Adam moments. Nothing fails.
The run sees it directly: on a checked step (``hooks._due``) each optimizer notes, per parameter
with a gradient, the gradient tensor (weakly) and its version. When another optimizer then steps
and finds the very same gradient tensor, unchanged, on a parameter the first one stepped (no
``backward()`` wrote into it, no ``zero_grad`` replaced or zeroed it: either changes the tensor
or bumps its version), the gradient was applied twice. A step run from inside another
optimizer's step (a wrapper such as Lookahead or ZeroRedundancyOptimizer stepping the optimizer
it wraps) is one update, not two: it is neither noted nor compared. Two optimizers over the same
parameters that step after different backward passes (phases, alternating losses) have new
gradients each time and are never reported. When every checked step of the second optimizer
re-applied the first's gradient the finding leads; when it happened on some steps only (an
optimizer whose parameters later stop getting gradients) it comes after every other silent
finding. The line named is where the optimizer was built (seen when its constructor ran): of the
two, the one for which the shared parameters are the smaller part of what it holds (it took a
whole module's ``parameters()`` that another optimizer is dedicated to); on a tie, the one that
stepped second.

# NOTE [decay without a gradient]
A parameter "frozen" by making its gradient zero (a hook returning zeros, ``p.grad.zero_()``
or ``p.grad = torch.zeros_like(p)`` before the step) is still stepped: weight decay shrinks it
(pytorch#38581). On checked steps the run measures every gradient's norm (one fused call) and,
for the parameters whose gradient is exactly zero, a checksum before and after the step. A
parameter is reported when its group has ``weight_decay > 0``, its gradient was exactly zero at
every checked step and the step changed it, and either it was checked at least twice or no
parameter of that optimizer had a non-zero gradient at any checked step (a layer behind a
zero-initialised one, LoRA's ``A`` under ``B = 0``, has a zero gradient at the first step only).
A parameter frozen with ``requires_grad=False`` has no gradient at all, and torch's optimizers
skip it; a parameter whose module never ran a forward with grad on (kept in the loss as
``0 * p.sum()``, the DDP idiom for unused parameters) is not reported. The line named is where the optimizer was built; a gradient hook on the parameter is
named as related.
"""
from __future__ import annotations

import sys
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, listed, make, src
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.opt_facts import _due
from gradtrace.runtime.trace.aliased import check_aliases
from gradtrace.runtime.trace.opt_state import built_line
from gradtrace.runtime.trace.row_decay import check_rows, row_findings

_PENDING = 64  # parameters whose movement one step checks, at most


@dataclass
class StepAudit:
    """One optimizer's checked steps (NOTE [one gradient, two steps], [decay without a
    gradient])."""

    # id(p) -> (its gradient, the gradient's version) at the last checked step
    grads: dict[int, tuple[weakref.ref[torch.Tensor], int]] = field(default_factory=dict)
    done: bool = False  # that step returned
    # id(p) -> [ref, checks, moved, name (read when it first moved: the model may die)]
    zero: dict[int, list[Any]] = field(default_factory=dict)
    nonzero: set[int] = field(default_factory=set)  # ids seen with a non-zero gradient
    pending: list[tuple[torch.Tensor, tuple[float, float]]] = field(default_factory=list)
    built: Site | None = None  # where the optimizer was built (else where it steps)
    held: int = 0  # how many tensors it holds
    decay: Any = 0  # the weight decay of the last parameter seen moving without a gradient
    # NOTE [decayed rows] (row_decay.py): id(p) -> [ref, checks, moved, name, rows, decay, sum]
    rows: dict[int, list[Any]] = field(default_factory=dict)
    rows_ok: set[int] = field(default_factory=set)  # a check where few used rows were zero


@dataclass
class Twice:
    """One gradient applied by two optimizers (the first record stepped first)."""

    first: Any
    second: Any
    names: list[str]  # of the parameters both stepped
    count: int  # parameters both stepped
    hits: int = 1  # checked steps of the second that re-applied the first's gradient


def before_step(data: Any, rec: Any, opt: torch.optim.Optimizer,
                name_of: Callable[[Any, torch.Tensor], str]) -> None:
    """From the step pre-hook, on a checked step of ``opt`` that found gradients
    (``name_of(data, p)`` names a parameter: ``hooks.param_name``)."""
    if _nested(opt):
        return
    pairs = [(p, p.grad) for g in opt.param_groups for p in g["params"]
             if p.grad is not None and not p.grad.is_sparse and p.grad.is_floating_point()
             and not p.grad.is_inference()]  # (an inference tensor has no version counter)
    if not pairs:
        return
    audit = rec.audit
    if audit is None:
        audit = rec.audit = StepAudit(built=built_line(data, rec),
                                      held=sum(len(g["params"]) for g in opt.param_groups))
        check_aliases(data, rec, opt, name_of)  # NOTE [aliased parameters]
    _compare(data, rec, pairs, name_of)
    audit.grads = {id(p): (weakref.ref(g), g._version) for p, g in pairs}
    audit.done = False
    with torch.no_grad():
        norms = torch._foreach_norm([g for _, g in pairs])
        zero = (torch.stack([n.float().cpu() for n in norms]) == 0).tolist()
    audit.pending = []
    for (p, g), z in zip(pairs, zero):
        if not z:
            audit.nonzero.add(id(p))
            if id(p) in data.rows_used and _decay_of(opt, p):
                check_rows(data, audit, p, g, _decay_of(opt, p), name_of)  # [decayed rows]
            continue
        entry = audit.zero.get(id(p))
        if entry is None or entry[0]() is not p:
            entry = audit.zero[id(p)] = [weakref.ref(p), 0, False, ""]
        entry[1] += 1
        if len(audit.pending) < _PENDING and _decay_of(opt, p):
            audit.pending.append((p, _checksum(p)))


def after_step(data: Any, rec: Any, name_of: Callable[[Any, torch.Tensor], str]) -> None:
    """From the step post-hook: which zero-gradient parameters the step moved."""
    audit, opt = rec.audit, rec.ref()
    if audit is None:
        return
    audit.done = True
    for p, before in audit.pending:
        if _checksum(p) != before:
            entry = audit.zero.get(id(p))
            if entry is not None and entry[0]() is p:
                if not entry[2] and _ran(data, p) and not _zero_input(audit, data, p):
                    entry[2], entry[3] = True, name_of(data, p)
                audit.decay = _decay_of(opt, p) if opt is not None else audit.decay
    audit.pending = []


def _zero_input(audit: Any, data: Any, p: torch.Tensor) -> bool:
    """Whether another parameter of the module owning ``p`` (its bias) got a non-zero
    gradient: the module's output then had a gradient, and an all-zero gradient of its weight
    is what backward computes for an input that was all zero there (a dead feature map, e.g.
    a ReLU after a frozen eval-mode BatchNorm), not a freeze by zeroing the gradient. A hook
    on ``p`` (a zero mask on the weight alone) may be the freeze: not said then."""
    if getattr(p, "_backward_hooks", None) or getattr(p, "_post_accumulate_grad_hooks", None):
        return False
    for rec in list(data.modules.values()):
        m = rec.ref()
        if m is not None and any(q is p for q in m._parameters.values()):
            return any(q is not None and q is not p and id(q) in audit.nonzero
                       for q in m._parameters.values())
    return False


def _ran(data: Any, p: torch.Tensor) -> bool:
    """Whether the module owning ``p`` ran a forward with grad on (a parameter only kept in
    the loss as ``0 * p.sum()``, the DDP unused-parameter idiom, is not frozen by a zero
    gradient: it is not used)."""
    for rec in list(data.modules.values()):
        m = rec.ref()
        if m is not None and rec.grad_runs and any(q is p for q in m._parameters.values()):
            return True
    return False


def _nested(opt: torch.optim.Optimizer) -> bool:
    """Whether this step runs inside another optimizer's step (a wrapper stepping the
    optimizer it wraps)."""
    f, limit = sys._getframe(2), 64
    while f is not None and limit > 0:
        me = f.f_locals.get("self") if f.f_code.co_name in ("wrapper", "step") else None
        if me is not None and me is not opt and isinstance(me, torch.optim.Optimizer):
            return True
        f, limit = f.f_back, limit - 1
    return False


def _compare(data: Any, rec: Any, pairs: list[tuple[Any, Any]],
             name_of: Callable[[Any, torch.Tensor], str]) -> None:
    t = data.twice
    for other in list(data.optimizers.values()):
        audit = other.audit
        if other is rec or audit is None or not audit.done or other.ref() is None \
                or t is not None and (t.first, t.second) != (other, rec):
            continue
        shared = [p for p, g in pairs if _same(audit.grads.get(id(p)), g)]
        if shared and t is not None:
            t.hits += 1
        elif shared:
            data.twice = Twice(other, rec, [name_of(data, p) for p in shared[:7]], len(shared))
            return


def _same(seen: tuple[weakref.ref[torch.Tensor], int] | None, g: torch.Tensor) -> bool:
    """Whether ``g`` is the gradient tensor seen then, not written since (a backward() that
    accumulates into it, or a zero_(), bumps its version; one that replaces it is another
    tensor)."""
    return seen is not None and seen[0]() is g and seen[1] == g._version


def _decay_of(opt: torch.optim.Optimizer, p: torch.Tensor) -> float:
    """The weight decay of ``p``'s group (0 when there is none or it is not a number)."""
    for g in opt.param_groups:
        if any(q is p for q in g["params"]):
            wd = g.get("weight_decay", 0)
            return wd if isinstance(wd, (int, float)) and wd > 0 else 0
    return 0


def _checksum(p: torch.Tensor) -> tuple[float, float]:
    with torch.no_grad():
        v = p.detach().double()
        return float(v.sum()), float((v * v).sum())


# -- findings ----------------------------------------------------------------------------------
def applied_findings(data: Any) -> tuple[list[Finding], list[Finding]]:
    """(findings that lead, findings that come after every other silent finding):
    NOTE [one gradient, two steps] leads when every checked step of the second optimizer re-applied the
    first's gradient, else it comes last (it happened on some steps only: a side effect of
    another problem more often than the problem); then NOTE [decay without a gradient]."""
    twice = _twice_finding(data)
    t = data.twice
    systematic = t is not None and t.hits >= sum(1 for s in range(1, t.second.steps + 1)
                                                 if _checked(s))
    return (twice if systematic else []) + _decay_findings(data), [] if systematic else twice


def _checked(step: int) -> bool:
    return _due(step)


def _twice_finding(data: Any) -> list[Finding]:
    t = data.twice
    if t is None:
        return []
    first, second = t.first.audit, t.second.audit
    blamed, other = (first, second) if t.count / max(1, first.held) < \
        t.count / max(1, second.held) else (second, first)
    shown = ", ".join(t.names[:6]) + (f" and {t.count - 6} more" if t.count > 6 else "")
    here, there = blamed.built, other.built
    return [make(code_for("parameters-stepped-twice", "GT406"), here,
                 f"{shown} {'is' if t.count == 1 else 'are'} held by the optimizer built here "
                 f"and by the one built at {src(there)}, and both step the gradient of one "
                 "backward(): the same gradient is "
                 "applied twice, so these parameters take two updates per batch (and two sets of "
                 "optimizer state)",
                 fix="give each parameter to one optimizer (leave the shared module's parameters "
                     "out of this one), or step only one of them per backward()",
                 related=[(t.first.site, "the first optimizer steps here"),
                          (t.second.site, "the second steps here with the same gradient"),
                          (there, "the other optimizer holding them is built here")],
                 severity="warning")]


def _decay_findings(data: Any) -> list[Finding]:
    out = []
    for rec in list(data.optimizers.values()):
        audit = rec.audit
        if audit is None:
            continue
        out += row_findings(data, rec)
        moved = [(e[3], e[1], e[0]()) for k, e in audit.zero.items()
                 if e[2] and k not in audit.nonzero]
        if not moved or not (audit.nonzero == set() or any(n >= 2 for _, n, _ in moved)):
            continue
        checks = max(n for _, n, _ in moved)
        names = [name for name, _, _ in moved]
        shown = listed(names)
        related: list[tuple[Site | None, str]] = [(rec.site, "the optimizer steps here")]
        hook = _zeroing_hook([p for _, _, p in moved if p is not None])
        if hook is not None:
            related.append(hook)
        out.append(make("GT870", audit.built,
                        f"{shown} got an all-zero gradient at every checked step ({checks}), yet "
                        f"step() changed {'it' if len(names) == 1 else 'them'}: this optimizer "
                        f"applies weight decay ({audit.decay}) to every parameter that has a "
                        "gradient, zero or not, so a parameter frozen by zeroing its gradient still shrinks",
                        fix="freeze with requires_grad_(False) (the optimizer then skips the "
                            "parameter), leave it out of the optimizer, or put it in a parameter "
                            "group with weight_decay=0", related=related, severity="warning"))
    return out


def _zeroing_hook(params: list[torch.Tensor]) -> tuple[Site | None, str] | None:
    """The definition of a gradient hook registered on one of ``params``, if any."""
    for p in params:
        for hook in list((getattr(p, "_backward_hooks", None) or {}).values()):
            code = getattr(hook, "__code__", None) or getattr(
                getattr(hook, "__call__", None), "__code__", None)
            if code is not None:
                return (Site(code.co_filename, code.co_firstlineno, code.co_name),
                        "a gradient hook on it is defined here")
    return None
