"""Per-step gradient statistics for one watched parameter set: batched, one host sync per step.

# NOTE [watch cost]
Everything a step needs is computed with ``torch._foreach_*`` kernels over all gradients at
once (2-norm, inf-norm = max abs, 0-norm = non-zero count), stacked, and copied to the host
with a single ``tolist()`` per device. Nothing is synchronised per parameter except on the
rare anomaly path (counting the non-finite entries of a gradient whose norm is non-finite).
Weights are only read: the update norm copies the weights into a private buffer before the
step and subtracts afterwards, so no parameter bit ever changes.
"""
from __future__ import annotations

import logging
import weakref
from typing import Sequence

import torch

from gradtrace.report.model import NanSource, ParamInfo, ParamSummary, StepRecord, Track

LOG = logging.getLogger(__name__)
_INF = float("inf")
_UNIT_MODULES = ("Linear", "Conv1d", "Conv2d", "Conv3d", "LazyLinear", "BatchNorm1d",
                 "BatchNorm2d", "BatchNorm3d")
_STALL_RATIO = 1e-10
_SAMPLE = 32768


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


def _norms(tensors: list[torch.Tensor], ord: float) -> list[torch.Tensor]:
    """``torch._foreach_norm`` with a per-tensor fallback (mixed devices, old torch)."""
    if not tensors:
        return []
    try:
        return list(torch._foreach_norm(tensors, ord))
    except (RuntimeError, TypeError, NotImplementedError):
        return [torch.linalg.vector_norm(t, ord) for t in tensors]


def _to_host(values: list[torch.Tensor]) -> list[float]:
    """All scalars to Python floats with one ``tolist()`` (one host sync) per device."""
    out = [0.0] * len(values)
    by_dev: dict[torch.device, list[int]] = {}
    for k, v in enumerate(values):
        by_dev.setdefault(v.device, []).append(k)
    for ids in by_dev.values():
        host = torch.stack([values[k].to(torch.float32) for k in ids]).tolist()
        for k, x in zip(ids, host):
            out[k] = x
    return out


def _sample(g: torch.Tensor) -> torch.Tensor:
    """All of a small gradient, or an evenly strided sample of ``_SAMPLE`` entries of a big
    one (the zero fraction of big tensors is an estimate; counting every entry would cost
    more than the rest of the statistics together)."""
    flat = g.reshape(-1)
    n = flat.numel()
    return flat if n <= _SAMPLE else flat[:: -(-n // _SAMPLE)]


def _dense(g: torch.Tensor) -> tuple[torch.Tensor, int]:
    """The values to measure and the element count of a (possibly sparse) gradient."""
    if g.is_sparse:
        return g.coalesce().values(), g.numel()
    return g.detach(), g.numel()


class Collector:
    """Records gradient, update and loss statistics for one list of parameters."""

    def __init__(self, name: str, named: Sequence[tuple[ParamInfo, torch.Tensor]], *,
                 every: int = 1, capacity: int = 256, has_optimizer: bool = False,
                 track_updates: bool = True, site: tuple[str, int] = ("<unknown>", 1)) -> None:
        self.name = name
        self.site = site
        self.infos = [info for info, _ in named]
        self.refs = [weakref.ref(p) for _, p in named]
        self.every = every
        self.has_optimizer = has_optimizer
        self.history = History(capacity)
        self.total_steps = 0
        self.recorded = 0
        self.last: StepRecord | None = None
        self.counts = [[0, 0, 0, 0, 0] for _ in named]  # graded, nonfinite, zero, updated, stalled
        self.first_nonfinite: list[int | None] = [None] * len(named)
        self.upd_idx = [i for i, info in enumerate(self.infos)
                        if info.requires_grad and info.in_optimizer is not False]
        self.unit_idx = {i for i, info in enumerate(self.infos)
                         if info.name.rsplit(".", 1)[-1] == "bias" and len(info.shape) == 1
                         and info.module_type in _UNIT_MODULES}
        self.unit_acc: dict[int, torch.Tensor] = {}
        self.track_updates = track_updates
        self.snap: list[torch.Tensor] | None = None
        self.snap_ok = False
        self.diff: list[torch.Tensor] | None = None
        self.loss: torch.Tensor | None = None
        self.nan_source: NanSource | None = None
        self._pending: tuple[list[int], list[int], list[torch.Tensor]] | None = None

    # ------------------------------------------------------------------ step protocol
    def params(self) -> list[torch.Tensor | None]:
        """The watched parameters still alive (None where collected)."""
        return [r() for r in self.refs]

    def recording(self) -> bool:
        """True if the current step is one to record (every ``every``-th step)."""
        return self.total_steps % self.every == 0

    def begin(self, reached: Sequence[bool] | None = None) -> None:
        """Measure the gradients of the current step on the device (no host sync)."""
        ps = self.params()
        idx, sizes, grads = [], [], []
        for i, p in enumerate(ps):
            g = None if p is None else p.grad
            if g is None or (reached is not None and not reached[i]):
                continue
            idx.append(i)
            grads.append(_dense(g)[0])
        mins, maxs, nnz = [], [], []
        for g in grads:  # aminmax and a sampled count beat foreach inf/0-norms on CPU
            lo, hi = torch.aminmax(g) if g.numel() else (g.new_zeros(()), g.new_zeros(()))
            mins.append(lo)
            maxs.append(hi)
            sample = _sample(g)
            sizes.append(sample.numel())
            nnz.append(torch.count_nonzero(sample))
        values = _norms(grads, 2.0) + mins + maxs + nnz
        self._accumulate_units(idx, grads)
        self._pending = (idx, sizes, values)

    def _accumulate_units(self, idx: list[int], grads: list[torch.Tensor]) -> None:
        units = [(i, g) for i, g in zip(idx, grads) if i in self.unit_idx and g.dim() == 1]
        if not units:
            return
        accs = []
        for i, g in units:
            acc = self.unit_acc.get(i)
            if acc is None or acc.shape != g.shape or acc.device != g.device:
                acc = self.unit_acc[i] = torch.zeros_like(g, dtype=torch.float32)
            accs.append(acc)
        absg = [g.abs().to(torch.float32) for _, g in units] if len(units) < 2 else \
            [t.to(torch.float32) for t in torch._foreach_abs([g for _, g in units])]
        torch._foreach_add_(accs, absg)

    def snapshot(self) -> None:
        """Copy the current weights so the next :meth:`finish` can measure the update."""
        if not self.track_updates or not self.upd_idx:
            return
        ps = self.params()
        cur = [ps[i] for i in self.upd_idx]
        if any(p is None for p in cur):
            self.snap_ok = False
            return
        cur_d = [p.detach() for p in cur if p is not None]
        try:
            if self.snap is None:
                raise RuntimeError("no buffer yet")
            torch._foreach_copy_(self.snap, cur_d)
        except (RuntimeError, AttributeError):
            self.snap = [t.clone() for t in cur_d]
        self.snap_ok = True

    def _diff(self, cur: list[torch.Tensor]) -> list[torch.Tensor]:
        """``new - old`` without touching the snapshot (kept for a NaN replay). On CPU a
        persistent buffer avoids page-faulting fresh memory every step; elsewhere the
        caching allocator makes a temporary cheap."""
        snap = self.snap or []
        if cur and cur[0].device.type != "cpu":
            return list(torch._foreach_sub(cur, snap))
        try:
            if self.diff is None:
                raise RuntimeError("no buffer yet")
            torch._foreach_copy_(self.diff, cur)
        except (RuntimeError, AttributeError):
            self.diff = [t.clone() for t in cur]
        torch._foreach_sub_(self.diff, snap)
        return self.diff

    def pre_step_weights(self) -> dict[int, torch.Tensor]:
        """Weights as they were at :meth:`snapshot` (index -> tensor), if a snapshot is valid.
        (Rare path: only used to replay a NaN step.)"""
        if not (self.snap_ok and self.snap is not None):
            return {}
        return dict(zip(self.upd_idx, self.snap))

    def finish(self) -> list[int]:
        """Add update norms and the loss, sync once, store the record. Returns the indices of
        parameters with non-finite gradients."""
        if self._pending is None:
            return []
        idx, sizes, values = self._pending
        self._pending = None
        n_grad = len(idx)
        upd: list[int] = []
        if self.snap_ok and self.snap is not None:
            ps = self.params()
            cur = [ps[i] for i in self.upd_idx]
            if all(p is not None for p in cur):
                cur_d = [p.detach() for p in cur if p is not None]
                diff = self._diff(cur_d)
                values = values + _norms(diff, 2.0) + _norms(cur_d, 2.0)
                upd = self.upd_idx
        loss = self.loss
        self.loss = None
        if loss is not None:
            values = values + [loss]
        host = _to_host(values)
        return self._store(idx, sizes, host, n_grad, upd, loss is not None)

    # ------------------------------------------------------------------ bookkeeping
    def _store(self, idx: list[int], sizes: list[int], host: list[float], n: int,
               upd: list[int], has_loss: bool) -> list[int]:
        p_count = len(self.infos)
        norm: list[float | None] = [None] * p_count
        mx: list[float | None] = [None] * p_count
        zf: list[float | None] = [None] * p_count
        nf: list[int | None] = [None] * p_count
        un: list[float | None] = [None] * p_count
        wn: list[float | None] = [None] * p_count
        bad: list[int] = []
        for k, i in enumerate(idx):
            lo, hi = host[n + k], host[2 * n + k]
            norm[i], mx[i] = host[k], (lo if lo != lo else max(-lo, hi))  # NaN stays NaN
            nnz = host[3 * n + k]
            zf[i] = 1.0 - nnz / sizes[k] if sizes[k] else 1.0
            nf[i] = 0
            if not (abs(norm[i]) < _INF):  # NaN or Inf
                nf[i] = self._count_nonfinite(i)
                if nf[i]:
                    bad.append(i)
        m = len(upd)
        for k, i in enumerate(upd):
            un[i], wn[i] = host[4 * n + k], host[4 * n + m + k]
        loss = host[-1] if has_loss else None
        rec = StepRecord(self.total_steps, loss, tuple(norm), tuple(mx), tuple(zf), tuple(nf),
                         tuple(un), tuple(wn))
        self._count(rec, bad)
        self.last = rec
        self.history.add(self.recorded, rec)
        self.recorded += 1
        return bad

    def _count_nonfinite(self, i: int) -> int:
        p = self.refs[i]()
        g = None if p is None else p.grad
        if g is None:
            return 0
        vals, _ = _dense(g)
        return int((~torch.isfinite(vals)).sum())

    def _count(self, rec: StepRecord, bad: list[int]) -> None:
        for i, c in enumerate(self.counts):
            n, z = rec.norm[i], rec.zero_frac[i]
            if n is None:
                continue
            if z is not None and z >= 1.0:
                c[2] += 1
            else:
                c[0] += 1
            u, w = rec.update_norm[i], rec.weight_norm[i]
            if u is not None and w is not None and n > 0 and i not in bad:
                c[3] += 1
                if u <= _STALL_RATIO * w:
                    c[4] += 1
        for i in bad:
            self.counts[i][1] += 1
            if self.first_nonfinite[i] is None:
                self.first_nonfinite[i] = rec.step

    def end_step(self) -> None:
        """Advance the step counter (called once per step, recorded or not)."""
        self.total_steps += 1

    # ------------------------------------------------------------------ export
    def summaries(self) -> tuple[ParamSummary, ...]:
        """Exact per-parameter counters (the dead-unit count syncs once per bias)."""
        out = []
        for i, c in enumerate(self.counts):
            units = dead = None
            acc = self.unit_acc.get(i)
            if acc is not None:
                units, dead = acc.numel(), int((acc == 0).sum())
            out.append(ParamSummary(graded_steps=c[0], nonfinite_steps=c[1],
                                    first_nonfinite_step=self.first_nonfinite[i],
                                    zero_grad_steps=c[2], updated_steps=c[3],
                                    zero_update_steps=c[4], units=units, dead_units=dead))
        return tuple(out)

    def to_track(self) -> Track:
        """A frozen :class:`Track` of everything recorded so far."""
        steps = list(self.history.items)
        if self.last is not None and (not steps or steps[-1].step != self.last.step):
            steps.append(self.last)
        return Track(name=self.name, params=tuple(self.infos), summaries=self.summaries(),
                     steps=tuple(steps), total_steps=self.total_steps, every=self.every,
                     stride=self.history.stride, has_optimizer=self.has_optimizer,
                     nan_source=self.nan_source, path=self.site[0], line=self.site[1])

    def release(self) -> None:
        """Drop every tensor this collector holds (buffers, accumulators, the last loss)."""
        self.snap = None
        self.diff = None
        self.snap_ok = False
        self.loss = None
        self._pending = None
