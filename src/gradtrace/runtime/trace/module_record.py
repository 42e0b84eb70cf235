"""What the global module hooks record about one module object (NOTE [copied into])."""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from gradtrace.runtime.frames import Site

if TYPE_CHECKING:
    from gradtrace.runtime.trace.hooks import HookState

Tensor = torch.Tensor


@dataclass
class ModuleRecord:
    """What happened to one module object while tracing."""

    ref: weakref.ref[torch.nn.Module]
    site: Site | None
    grad_runs: int = 0
    nograd_runs: int = 0
    nograd_site: Site | None = None
    # the line its switch's frame ran then (NOTE [no_grad kept for a frozen module])
    nograd_stmt: Site | None = None
    in_checkpoint: bool = False
    trained: bool = False  # ran with grad on in train mode (NOTE [eval-mode training])
    off: Any = None  # user stack at its first eval-mode forward since then
    mode_verdict: int = 0  # 1: reported as training in eval mode, 2: excused
    start: list[Tensor] | None = None  # sums of its own parameters at its first grad forward
    stats_frozen: int = 0  # a frozen-affine norm layer ran in train mode with grad (2: pretrained)
    train_site: Site | None = None  # the .train() that switched it on (NOTE [probe statistics])
    eval_runs: int = 0  # forwards with grad on in eval mode (NOTE [eval is no freeze])

    def copied_into(self, m: torch.nn.Module, data: HookState, in_opt: set[int]) -> bool:
        """# NOTE [copied into]
        Whether the program itself keeps ``m`` (which got gradients but is in no optimizer) as
        a copy of a trained module: its own parameters changed since its first forward with
        grad (a DQN target refreshed by ``load_state_dict(online.state_dict())``, a Polyak
        ``p_t.data.copy_(...)``, an EMA teacher), or at that forward they equalled those of an
        optimized module of its type at its own first one (made by ``copy.deepcopy`` or
        ``load_state_dict`` before the first refresh). Gradients that reach such a copy (its
        output was not detached) change nothing that trains. A module left out of the
        optimizer (a second tower, a model re-created) starts from its own initialisation
        and never moves."""
        ps = _plain_params(m)
        if self.start is None or len(ps) != len(self.start):
            return False
        if any(not torch.equal(p.detach().sum(dtype=torch.float64), s)
               for p, s in zip(ps, self.start)):
            return True
        for r in list(data.modules.values()):
            o = r.ref()
            if o is not None and o is not m and type(o) is type(m) and r.start is not None \
                    and len(r.start) == len(self.start) \
                    and all(id(q) in in_opt for q in _plain_params(o)) \
                    and all(torch.equal(a, b) for a, b in zip(r.start, self.start)):
                return True
        return False


def _plain_params(m: torch.nn.Module) -> list[Tensor]:
    """``m``'s own floating-point parameters held as plain tensors (no DTensor or other
    subclass, whose ``sum`` may communicate; nothing on the meta device)."""
    return [p for p in m._parameters.values() if p is not None and p.is_floating_point()
            and type(p.data) is Tensor and p.device.type != "meta"]


def holds(child: object, module: torch.nn.Module) -> bool:
    """``child`` is ``module`` or a layer that registers it (a block held in a plain list whose
    own submodules are the layers that ran: their parameters are missed all the same)."""
    return child is module or isinstance(child, torch.nn.Module) and any(
        m is module for m in child.modules())
