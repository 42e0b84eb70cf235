"""Per-step gradient statistics for one watched parameter set: batched, one host sync per step.

# NOTE [watch cost]
Per step, per gradient: its exact 2-norm, its exact max |g| (``aminmax``, about 10x faster
on CPU than an inf-norm) and the non-zero count of a sample of at most ``tensors.SAMPLE`` entries
(every k-th contiguous chunk of ``tensors.CHUNK``). On CPU they are written into one buffer
(NOTE [one buffer]); on GPUs the norms come from fused foreach kernels. The values reach the host in
one transfer per device. That one sync
happens when the gradients are measured (before ``optimizer.step()``, so a NaN is seen before
it reaches the weights) and also carries the previous step's update norms, which are left on
the device until then. Nothing is synchronised per parameter except on the rare anomaly path
(counting the non-finite entries of a gradient whose norm is non-finite).

Weights are only read: the same sample of each weight is copied to a contiguous buffer before
the step and subtracted from the weight after it, and both norms are taken in that buffer
(NOTE [update rows]), so the update-to-weight ratio is exact for tensors up to ``SAMPLE``
entries and estimated above; no parameter bit changes and no copy of the model is kept.

What costs: on CPU, in a training step, each of these calls costs several times what it
costs in a micro-benchmark (cold caches after the backward), so the per-step cost is mostly
the number of calls (a handful per parameter), plus two passes over the gradients (norm and
max). ``benchmarks/watch_overhead.py`` measures it; the sample was cut from 32,768 to 4,096
entries for that reason (each chunk read from a cold weight costs a cache miss).
"""
from __future__ import annotations

import logging
import math
import weakref
from dataclasses import replace
from typing import Sequence

import torch

from gradtrace.report.model import NanSource, ParamInfo, ParamSummary, StepRecord, Track
from gradtrace.runtime.watch.tensors import (
    INF, History, extremes, geometry, norms, sample, sampled_size, to_host,
)

LOG = logging.getLogger(__name__)
_UNIT_MODULES = ("Linear", "Conv1d", "Conv2d", "Conv3d", "LazyLinear", "BatchNorm1d",
                 "BatchNorm2d", "BatchNorm3d")
_STALL_RATIO = 1e-10
_UNIT_CHECK = 16  # recorded steps between two checks for biases with no dead unit left ...
_UNIT_EARLY = frozenset({2, 4, 8})  # ... after checks at these counts of recorded steps


class Collector:
    """Records gradient, update and loss statistics for one list of parameters.

    Its step methods run with grad mode off: the watcher calls them through ``_guard``."""

    def __init__(self, name: str, named: Sequence[tuple[ParamInfo, torch.Tensor]], *,
                 every: int = 1, capacity: int = 256, has_optimizer: bool = False,
                 track_updates: bool = True, site: tuple[str, int] = ("<unknown>", 1)) -> None:
        self.name = name
        self.site = site
        self.infos = [info for info, _ in named]
        self.refs = [weakref.ref(p) for _, p in named]
        self.every = every
        self.anchor = 0  # steps are recorded at anchor + k * every (NOTE [watch pace])
        self.has_optimizer = has_optimizer
        self.history = History(capacity)
        self.total_steps = 0
        self.recorded = 0
        self.last: StepRecord | None = None
        self.counts = [[0, 0, 0, 0, 0] for _ in named]  # graded, nonfinite, zero, updated, stalled
        self.first_nonfinite: list[int | None] = [None] * len(named)
        self.upd_idx = [i for i, info in enumerate(self.infos)
                        if info.requires_grad and info.in_optimizer is not False]
        self.geoms = [geometry(info.numel) for info in self.infos]
        # sampled norms scale by sqrt(numel / sampled entries) to estimate the whole tensor's
        self.upd_scale = [math.sqrt(self.infos[i].numel / sampled_size(self.infos[i].numel))
                          for i in self.upd_idx]
        self.unit_idx = {i for i, info in enumerate(self.infos)
                         if info.name.rsplit(".", 1)[-1] == "bias" and len(info.shape) == 1
                         and info.module_type in _UNIT_MODULES}
        self.unit_acc: dict[int, torch.Tensor] = {}
        self._vals: dict = {}  # (count, dtype) -> value buffer and its entries (NOTE [one buffer])
        self.track_updates = track_updates
        self.snap: list[torch.Tensor] | None = None  # weight samples before the step
        # ... as rows of these buffers, with a flat output for their norms (NOTE [update rows])
        self._rows: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        self._dst: list[torch.Tensor] = []  # the rows a snapshot copies the samples into
        # the snapshot's weight views and data pointers, held from before to after the step
        self._held: tuple[list[torch.Tensor], list[int]] | None = None
        self._groups: list[list[int]] = []  # the weights of each buffer, in row order
        self.snap_ok = False
        self.loss: torch.Tensor | None = None
        self.nan_source: NanSource | None = None
        self._upd_pending: list[torch.Tensor] | None = None
        self._open: tuple[int, float | None, list[float | None], list[float | None],
                          list[float | None], list[int | None], list[int], set[int]
                          ] | None = None

    # ------------------------------------------------------------------ step protocol
    def recording(self) -> bool:
        """True if the current step is one to record (every ``every``-th step)."""
        return (self.total_steps - self.anchor) % self.every == 0

    def _grad_values(self, reached: Sequence[bool] | None
                     ) -> tuple[list[int], list[int], list[torch.Tensor]]:
        """Device values for the current gradients, which reach the host as, in order: the
        2-norms, (min, max) pairs and the non-zero counts of their samples
        (see NOTE [watch cost])."""
        idx, sizes, grads, samples = [], [], [], []
        geoms = self.geoms
        for i, ref in enumerate(self.refs):
            p = ref()
            g = None if p is None else p.grad
            if g is None or (reached is not None and not reached[i]):
                continue
            geom = geoms[i]
            if g.is_sparse:
                g = g.coalesce().values()
                geom = geometry(g.numel())
            samples.append(sample(g, geom))
            sizes.append(g.numel() if geom is None else geom[0][0] * geom[0][1])
            idx.append(i)
            grads.append(g)
        if self.unit_idx:
            self._accumulate_units(idx, grads)
            done = self.recorded + 1
            if done % _UNIT_CHECK == 0 or done in _UNIT_EARLY:
                self._retire_live_units()
        out = self._into_buffer(grads, samples)
        if out is None:
            counts = [torch.count_nonzero(s) for s in samples]
            out = norms(grads, 2.0) + extremes(grads) + counts
        return idx, sizes, out

    def _into_buffer(self, grads: list[torch.Tensor], samples: list[torch.Tensor]
                     ) -> list[torch.Tensor] | None:
        """# NOTE [one buffer]
        On CPU, with float32/float64 gradients, every value of the step is written (``out=``)
        into one preallocated buffer read by ONE ``tolist()``, and with only two kinds of op,
        ``vector_norm`` (2-norm; order 0 counts non-zeros) and ``aminmax``. In a training
        step the first call of each kind of op costs about 30 us (its code is cold after the
        backward) and each ``.item()`` a few us, so this beats a foreach norm plus
        ``count_nonzero`` plus an ``.item()`` per value. None when it does not apply."""
        if not grads:
            return None
        g0 = grads[0]
        if not g0.is_cpu or g0.dtype not in (torch.float32, torch.float64):
            return None
        n = len(grads)
        got = self._vals.get((n, g0.dtype))
        if got is None:
            buf = torch.zeros(4 * n, dtype=g0.dtype)
            got = self._vals[(n, g0.dtype)] = (buf, [buf[k] for k in range(4 * n)])
        buf, v = got
        norm, aminmax, dtype = torch.linalg.vector_norm, torch.aminmax, g0.dtype
        for k, (g, s) in enumerate(zip(grads, samples)):
            if g.dtype is not dtype or not g.is_cpu or not g.numel():
                return None
            norm(g, out=v[k])
            aminmax(g, out=(v[n + 2 * k], v[n + 2 * k + 1]))
            norm(s, 0, out=v[3 * n + k])
        return [buf]

    def _accumulate_units(self, idx: list[int], grads: list[torch.Tensor]) -> None:
        """Add g*g of each unit bias into a float32 accumulator; only whether an entry is
        still zero (a dead unit) is used, so adding a step twice on a retry is harmless."""
        units = [(i, g) for i, g in zip(idx, grads) if i in self.unit_idx]
        if not units:
            return
        gs = [g for _, g in units]
        accs = [self.unit_acc.get(i) for i, _ in units]
        try:
            if any(acc is None for acc in accs):
                raise RuntimeError("new accumulator")
            torch._foreach_addcmul_(accs, gs, gs)
        except (RuntimeError, TypeError):  # first step, a moved or resized bias, old torch
            for k, (i, g) in enumerate(units):
                acc = accs[k]
                if acc is None or acc.shape != g.shape or acc.device != g.device:
                    acc = self.unit_acc[i] = torch.zeros_like(g, dtype=torch.float32)
                acc.addcmul_(g.float(), g.float())

    def _retire_live_units(self) -> None:
        """Stop accumulating a bias once every one of its units has had a non-zero gradient:
        none of them can be dead any more (one host sync per check: every ``_UNIT_CHECK`` steps,
        and early ones, since most biases have no dead unit after a few steps)."""
        ids = [i for i in self.unit_idx if i in self.unit_acc]
        if not ids:
            return
        zeros = to_host([self.unit_acc[i].numel() - torch.count_nonzero(self.unit_acc[i])
                          for i in ids])
        self.unit_idx.difference_update(i for i, z in zip(ids, zeros) if z == 0)

    def _weights(self) -> tuple[list[torch.Tensor], list[int]] | None:
        """Samples (views) of the weights whose update is measured and the weights' data
        pointers, or None."""
        out, ptrs = [], []
        refs, geoms = self.refs, self.geoms
        for i in self.upd_idx:
            p = refs[i]()
            if p is None:
                return None
            out.append(sample(p, geoms[i]))
            ptrs.append(p.data_ptr())
        return (out, ptrs) if out else None

    def snapshot(self) -> None:
        """Copy (a strided sample of) each weight into two rows of a zero-padded buffer, one
        kept and one the update will be subtracted from (see NOTE [update rows])."""
        self.snap_ok = False
        self._held = self._weights() if self.track_updates else None
        if self._held is None:
            return
        cur = self._held[0]
        if self.snap is None or len(self.snap) != len(cur):
            self._make_rows(cur)
        try:
            torch._foreach_copy_(self._dst, cur + cur)
        except RuntimeError:  # a weight was resized or moved since the buffers were made
            self._make_rows(cur)
            torch._foreach_copy_(self._dst, cur + cur)
        self.snap_ok = True

    def _make_rows(self, cur: list[torch.Tensor]) -> None:
        """# NOTE [update rows]
        One zero-padded buffer per (device, dtype), of shape (2, weights, longest sample):
        before the step each weight sample is copied into its row of both halves; after it,
        the weight is subtracted from the second half. So copying in and subtracting are one
        foreach call each, and ONE ``vector_norm(dim=-1)`` per buffer gives every weight's
        norm before the step and its update's norm (the zero padding adds nothing), instead
        of calls per weight. ``self.snap`` holds the second half's rows shaped like the
        samples; ``self._groups`` the weights (positions in ``upd_idx``) of each buffer."""
        groups: dict[tuple[torch.device, torch.dtype], list[int]] = {}
        for k, t in enumerate(cur):
            groups.setdefault((t.device, t.dtype), []).append(k)
        keep, self.snap = [cur[0]] * len(cur), [cur[0]] * len(cur)
        self._rows, self._groups = [], []
        for (device, dtype), ks in groups.items():
            rows = torch.zeros(2, len(ks), max(cur[k].numel() for k in ks), dtype=dtype,
                               device=device)
            for r, k in enumerate(ks):
                n, shape = cur[k].numel(), cur[k].shape
                keep[k], self.snap[k] = rows[0, r, :n].view(shape), rows[1, r, :n].view(shape)
            flat = torch.zeros(2 * len(ks), dtype=dtype, device=device)
            self._rows.append((rows, flat, flat.view(2, len(ks))))
            self._groups.append(ks)
        self._dst = keep + self.snap

    def measure_update(self) -> None:
        """Device values for the update since :meth:`snapshot` (synced with the next step)."""
        held, self._held = self._held, None
        if not self.snap_ok or held is None or self.snap is None:
            self.snap_ok = False
            return
        self.snap_ok = False
        cur, ptrs = held  # the snapshot's views, unless a weight was rebound since
        refs = self.refs
        for i, ptr in zip(self.upd_idx, ptrs):
            p = refs[i]()
            if p is None or p.data_ptr() != ptr:  # ``p.data = ...`` in the step
                again = self._weights()
                if again is None:
                    return
                cur = again[0]
                break
        try:
            torch._foreach_sub_(self.snap, cur)  # the second rows now hold old - new
        except RuntimeError:  # a weight was resized or moved during the step
            self.snap = None
            return
        for rows, _, out in self._rows:
            torch.linalg.vector_norm(rows, dim=-1, out=out)
        self._upd_pending = [flat for _, flat, _ in self._rows]

    def _in_order(self, host: list[float]) -> list[float]:
        """Update norms then weight norms, in ``upd_idx`` order, from the buffers' values
        (per buffer: its weights' norms, then their updates' norms, in row order)."""
        m = sum(len(ks) for ks in self._groups)
        out = [0.0] * (2 * m)
        at = 0
        for ks in self._groups:
            n = len(ks)
            for r, k in enumerate(ks):
                out[m + k], out[k] = host[at + r], host[at + n + r]
            at += 2 * n
        return out

    def measure(self, reached: Sequence[bool] | None = None) -> list[int]:
        """Measure the current gradients (and loss), with ONE host sync that also brings the
        previous step's update. Returns the indices of parameters with non-finite grads."""
        idx, sizes, values = self._grad_values(reached)
        loss, self.loss = self.loss, None
        extra = [loss] if loss is not None else []
        upd, self._upd_pending = self._upd_pending, None
        upd = upd or []
        host = to_host(values + extra + upd)
        n = len(idx)
        m = 4 * n + len(extra)
        u = 2 * len(self.upd_idx) if upd else 0
        self._close_open(self._in_order(host[m:m + u]) if upd else None)
        return self._open_record(idx, sizes, host[:3 * n], host[3 * n:4 * n],
                                 host[4 * n] if extra else None)

    def flush(self) -> None:
        """Finish the last measured step (syncs once if its update is still on the device).
        An update not measured yet is dropped rather than attributed to a later step."""
        upd, self._upd_pending = self._upd_pending, None
        if self._open is not None and not upd:
            self.snap_ok, self._held = False, None
        self._close_open(self._in_order(to_host(upd)) if upd else None)

    # ------------------------------------------------------------------ bookkeeping
    def _open_record(self, idx: list[int], sizes: list[int], host: list[float],
                     nnz: list[float], loss: float | None) -> list[int]:
        p_count = len(self.infos)
        norm: list[float | None] = [None] * p_count
        mx: list[float | None] = [None] * p_count
        zf: list[float | None] = [None] * p_count
        nf: list[int | None] = [None] * p_count
        bad: list[int] = []
        seen: set[int] = set()  # non-zero gradient inside the sample (see _count)
        n = len(idx)
        for k, i in enumerate(idx):
            lo, hi = host[n + 2 * k], host[n + 2 * k + 1]
            norm[i], mx[i] = host[k], (lo if lo != lo else max(-lo, hi))  # NaN stays NaN
            z = 1.0 - nnz[k] / sizes[k] if sizes[k] else 1.0
            if nnz[k]:
                seen.add(i)
            elif host[k] != 0.0:  # the sample missed the non-zero entries
                z = 1.0 - 1.0 / max(self.infos[i].numel, 1)
            zf[i] = z
            nf[i] = 0
            if not (abs(host[k]) < INF):  # NaN or Inf
                nf[i] = self._count_nonfinite(i)
                if nf[i]:
                    bad.append(i)
        self._open = (self.total_steps, loss, norm, mx, zf, nf, bad, seen)
        return bad

    def _close_open(self, upd: list[float] | None) -> None:
        if self._open is None:
            return
        step, loss, norm, mx, zf, nf, bad, seen = self._open
        self._open = None
        p_count = len(self.infos)
        un: list[float | None] = [None] * p_count
        wn: list[float | None] = [None] * p_count
        if upd:
            m = len(self.upd_idx)
            for k, (i, scale) in enumerate(zip(self.upd_idx, self.upd_scale)):
                un[i], wn[i] = upd[k] * scale, upd[m + k] * scale
        rec = StepRecord(step, loss, tuple(norm), tuple(mx), tuple(zf), tuple(nf), tuple(un),
                         tuple(wn))
        self._count(rec, bad, seen)
        self.last = rec
        self.history.add(self.recorded, rec)
        self.recorded += 1

    def _count_nonfinite(self, i: int) -> int:
        p = self.refs[i]()
        g = None if p is None else p.grad
        if g is None:
            return 0
        vals = g.coalesce().values() if g.is_sparse else g
        return int((~torch.isfinite(vals)).sum())

    def _count(self, rec: StepRecord, bad: list[int], seen: set[int]) -> None:
        """Per-parameter counters. An update is judged only where the sample it is measured
        on had a non-zero gradient: an embedding whose few touched rows lie outside the
        sample has a zero sampled update without being stalled."""
        for i, c in enumerate(self.counts):
            n = rec.norm[i]
            if n is None:
                continue
            if n == 0.0:
                c[2] += 1
            else:
                c[0] += 1
            u, w = rec.update_norm[i], rec.weight_norm[i]
            if u is not None and w is not None and i in seen and i not in bad:
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
        self.flush()
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
        self.flush()
        steps = list(self.history.items)
        if self.last is not None and (not steps or steps[-1].step != self.last.step):
            steps.append(self.last)
        return Track(name=self.name, params=self._current_infos(), summaries=self.summaries(),
                     steps=tuple(steps), total_steps=self.total_steps, every=self.every,
                     stride=self.history.stride, has_optimizer=self.has_optimizer,
                     nan_source=self.nan_source, path=self.site[0], line=self.site[1],
                     recorded=self.recorded)

    def _current_infos(self) -> tuple[ParamInfo, ...]:
        """Parameter infos with ``requires_grad`` as it is now (a parameter frozen after
        watching started counts as frozen, not as never graded)."""
        out = []
        for info, ref in zip(self.infos, self.refs):
            p = ref()
            if p is not None and bool(p.requires_grad) != info.requires_grad:
                info = replace(info, requires_grad=bool(p.requires_grad))
            out.append(info)
        return tuple(out)

    def release(self) -> None:
        """Drop every tensor this collector holds (buffers, accumulators, the last loss)."""
        self.flush()
        self._vals = {}
        self.snap = None
        self._rows, self._dst, self._held = [], [], None
        self.snap_ok = False
        self.loss = None
