"""Device-side helpers of the watch collector: sampled views, norms and extremes of many
tensors in few calls, one copy to the host, and the bounded step history (NOTE [watch cost]
in :mod:`gradtrace.runtime.watch.collect`)."""
from __future__ import annotations

import functools

import torch

from gradtrace.report.model import StepRecord

INF = float("inf")
SAMPLE = 4096
CHUNK = 512


class History:
    """A bounded step history: when full, keep every other record and double the stride.

    The memory stays bounded however long training runs, and the kept records still span
    the whole run evenly.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 2:
            raise ValueError(f"history capacity must be >= 2, got {capacity!r}")
        self.capacity = capacity
        self.stride = 1
        self.items: list[StepRecord] = []

    def wants(self, ordinal: int) -> bool:
        """True if the ``ordinal``-th recorded step would be kept."""
        return ordinal % self.stride == 0

    def add(self, ordinal: int, record: StepRecord) -> None:
        """Keep ``record`` (the ``ordinal``-th recorded step) if it falls on the stride."""
        if ordinal % self.stride:
            return
        self.items.append(record)
        if len(self.items) > self.capacity:
            self.items = self.items[::2]
            self.stride *= 2


def norms(tensors: list[torch.Tensor], ord: float) -> list[torch.Tensor]:
    """``torch._foreach_norm`` with a per-tensor fallback (mixed devices, old torch)."""
    if not tensors:
        return []
    try:
        return list(torch._foreach_norm(tensors, ord))
    except (RuntimeError, TypeError, NotImplementedError):
        return [torch.linalg.vector_norm(t, ord) for t in tensors]


_FUSED_PEAKS = frozenset({"cuda", "xpu"})  # devices where a foreach inf-norm is one kernel


def extremes(grads: list[torch.Tensor]) -> list[torch.Tensor]:
    """Two scalars per gradient whose larger magnitude is its max |g| (NaN if any is NaN).

    On CPU ``aminmax`` per tensor (a foreach inf-norm takes a path about 10x slower there);
    on GPUs one fused foreach inf-norm instead of a kernel launch per tensor."""
    if grads and grads[0].device.type in _FUSED_PEAKS and all(g.numel() for g in grads):
        try:
            return [p for p in torch._foreach_norm(grads, INF) for _ in (0, 1)]
        except (RuntimeError, TypeError, NotImplementedError):  # mixed devices, old torch
            pass
    out: list[torch.Tensor] = []
    for g in grads:
        if g.numel():
            out.extend(torch.aminmax(g))
        else:
            out += [g.new_zeros(())] * 2
    return out


def to_host(values: list[torch.Tensor]) -> list[float]:
    """The entries of scalars and 1-D tensors, in order, as Python numbers: one transfer (one
    host sync) per device."""
    out: list[float] = []
    if all(v.is_cpu for v in values):  # no sync to save: .item() beats a stack on CPU
        for v in values:
            if v.dim():
                out.extend(v.tolist())
            else:
                out.append(v.item())
        return out
    chunks: list[list[float]] = [[] for _ in values]
    by_dev: dict[torch.device, dict[torch.dtype, list[int]]] = {}
    for k, v in enumerate(values):
        by_dev.setdefault(v.device, {}).setdefault(v.dtype, []).append(k)
    for groups in by_dev.values():
        ids = [k for g in groups.values() for k in g]
        flats = [torch.cat([values[k].reshape(-1) for k in g]).to(torch.float32)
                 for g in groups.values()]
        host = (flats[0] if len(flats) == 1 else torch.cat(flats)).tolist()
        at = 0
        for k in ids:
            n = values[k].numel()
            chunks[k], at = host[at:at + n], at + n
    for c in chunks:
        out.extend(c)
    return out


@functools.lru_cache(maxsize=1024)
def geometry(n: int) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """Size and stride of the sample of an ``n``-entry contiguous tensor: every k-th
    contiguous chunk of ``CHUNK`` entries, about ``SAMPLE`` entries in all (so only ~1/k of
    the memory is read; an element-strided sample would still touch every cache line).
    None when the tensor is small enough to be used whole."""
    if n <= SAMPLE:
        return None
    rows = n // CHUNK
    k = -(-rows * CHUNK // SAMPLE)
    return (-(-rows // k), CHUNK), (k * CHUNK, 1)


def sample(t: torch.Tensor, geom: tuple[tuple[int, int], tuple[int, int]] | None
            ) -> torch.Tensor:
    """The sample of ``t`` described by ``geom`` (see :func:`geometry`), as a view."""
    if geom is None:
        return t
    if t.is_contiguous() or dense_in_memory(t):  # any stretch of its memory holds entries
        return t.as_strided(*geom)
    flat = t.reshape(-1)  # a copy for a tensor with gaps, still the same entries
    rows, k = flat.numel() // CHUNK, geom[1][0] // CHUNK
    return flat[: rows * CHUNK].view(rows, CHUNK)[::k]


def dense_in_memory(t: torch.Tensor) -> bool:
    """True for the channels-last layouts: permuted, but without gaps in memory."""
    if t.dim() == 4:
        return t.is_contiguous(memory_format=torch.channels_last)
    return t.dim() == 5 and t.is_contiguous(memory_format=torch.channels_last_3d)


def sampled_size(n: int) -> int:
    """How many entries :func:`sample` keeps of an ``n``-entry tensor."""
    geom = geometry(n)
    return n if geom is None else geom[0][0] * geom[0][1]
