"""A moving-average copy (EMA, mean teacher) that follows the parameters and not the statistics.

# NOTE [average that skips the statistics]
A mean teacher or an EMA model is refreshed from the trained model with grad off:
``for op, mp in zip(student.parameters(), teacher.parameters()): mp.data.mul_(d).add_(...)``.
``parameters()`` holds no buffers, so the copy's normalisation layers keep the running mean and
variance they had when it was made (zeros and ones for a fresh model) while the trained model's
move: the teacher in eval mode normalises with statistics that never match its averaged weights,
and its pseudo-labels and evaluations are off. Nothing fails.

Run-time facts: the provenance mode sees each in-place ``copy_``/``mul_``/``add_``/``lerp_`` made
with grad off from user code (not the optimizer's own updates, which it does not record), and
keeps the storage each one wrote (its data pointer; a ``.data`` alias shares it) with the line,
the first 4096 storages. When the trace ends, a normalisation layer with running statistics
(momentum set) is reported when its affine weight was written that way, its running mean never
was, and it never updated them itself (``num_batches_tracked`` is 0: it never ran in train
mode), while a layer of the same kind and shape that an optimizer stepped has updated its own
(the trained model's twin). The line named is the innermost loop around the write of the
weight (the loop over the parameters, where the buffers should be walked too), else the write.
A copy that also averages its buffers (``state_dict()`` pairs, ``copy_`` of the buffers), a
target network that runs in train mode (BYOL: its statistics move by its own forwards), and a
teacher loaded from a checkpoint (``load_state_dict`` copies the buffers too) are silent.
"""
from __future__ import annotations

from typing import Any

import torch

from gradtrace.runtime.frames import Site, raw_site

_KEPT = 4096
AVERAGING = frozenset({"copy_", "mul_", "add_", "lerp_", "__imul__", "__iadd__"})
_NormBase = torch.nn.modules.batchnorm._NormBase


def note_nograd_write(state: Any, name: str, args: tuple[Any, ...]) -> None:
    """From an in-place op ``name`` run with grad off (the mode's fast path)."""
    if name not in AVERAGING or not args or not isinstance(args[0], torch.Tensor):
        return
    writes = state.nograd_writes
    if len(writes) >= _KEPT:
        return
    t = args[0]
    try:
        if not t.is_floating_point() or t.dim() == 0 or t.is_sparse:
            return
        ptr = t.data_ptr()
    except RuntimeError:  # a tensor without storage (a functorch wrapper, meta): not a weight
        return
    if ptr and ptr not in writes:
        raw = raw_site()
        if raw is not None:
            writes[ptr] = state.site(raw)


def _held(data: Any) -> set[int]:
    return {id(p) for r in list(data.optimizers.values()) for o in [r.ref()] if o is not None
            for g in o.param_groups for p in g["params"]}


def _stats_kept(m: Any) -> bool:
    return isinstance(m, _NormBase) and m.track_running_stats and m.momentum is not None \
        and m.affine and m.running_mean is not None and m.num_batches_tracked is not None


def _layers(n: int) -> str:
    return f"{n} normalisation layers" if n > 1 else "a normalisation layer"


def average_stats_findings(state: Any, data: Any) -> list[Any]:
    """GT866 at the loop that averages the parameters only (see the NOTE)."""
    writes = state.nograd_writes
    if not writes or not any(r.steps for r in list(data.optimizers.values())):
        return []
    held = _held(data)
    norms = [m for r in list(data.modules.values()) for m in [r.ref()] if _stats_kept(m)]
    trained = {(type(m), tuple(m.weight.shape)) for m in norms
               if id(m.weight) in held and int(m.num_batches_tracked) > 0}
    if not trained:
        return []
    from gradtrace.runtime.build import make
    from gradtrace.runtime.trace.eval_dropped import _loop_line

    sites: dict[Site, int] = {}
    for m in norms:
        at = writes.get(m.weight.data_ptr())
        if at is None or id(m.weight) in held or int(m.num_batches_tracked) != 0 \
                or m.running_mean.data_ptr() in writes \
                or (type(m), tuple(m.weight.shape)) not in trained:
            continue
        line = _loop_line(at)
        sites[line] = sites.get(line, 0) + 1
    return [make("GT866", site,
                 f"this loop averages the parameters of a copy of the trained model into it, "
                 f"but not its buffers: {_layers(n)} of the copy keep"
                 f"{'' if n > 1 else 's'} the running mean and variance it had when it was "
                 "made (never run in train mode), while the trained model's move: the copy "
                 "normalises with statistics that do not match its averaged weights",
                 fix="average (or copy) the buffers too: walk named_buffers() beside "
                     "named_parameters(), or pair state_dict() entries",
                 severity="warning")
            for site, n in sites.items()]


__all__ = ["AVERAGING", "average_stats_findings", "note_nograd_write"]
