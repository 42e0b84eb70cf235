"""The logged gradient-flow metrics: layer groups and what is measured at an optimizer step.

See NOTE [which gradients are logged] in ``_common`` for when the trainers call it.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

MAX_SERIES = 32  # per-layer series per metric, at most (numbered blocks are bucketed)
PREFIX = "gradtrace/"


# ------------------------------------------------------------------------------ grouping
def _common_prefix(paths: list[list[str]]) -> int:
    """How many leading components every module path shares (one is always left)."""
    if not paths:
        return 0
    n = min(len(p) for p in paths)
    k = 0
    while k < n and all(p[k] == paths[0][k] for p in paths):
        k += 1
    return k


def layer_groups(names: Sequence[str], limit: int = MAX_SERIES) -> list[str]:
    """The series label of each parameter name, so that a deep model gives tens of series.

    A parameter belongs to its block (module path up to the first numeric index, e.g.
    ``encoder.layer.3``) or else to its module path cut at two levels (``embeddings``,
    ``classifier``), after removing the prefix all parameters share (``model.``). When that
    still makes more than ``limit`` labels, numbered blocks are bucketed (``layer.0-6``).
    """
    paths = [n.split(".")[:-1] for n in names]
    skip = _common_prefix(paths)
    keys: list[tuple[str, ...]] = []
    for parts in paths:
        parts = parts[skip:]
        cut = next((i for i, s in enumerate(parts) if s.isdigit()), None)
        keys.append(tuple(parts[:cut + 1] if cut is not None else parts[:2]))
    distinct = list(dict.fromkeys(keys))
    if len(distinct) > limit:
        keys = _bucket(keys, distinct, limit)
        if len(set(keys)) > limit:
            keys = [k[:1] for k in keys]
    return [".".join(k) if k else "(top)" for k in keys]


def _bucket(keys: list[tuple[str, ...]], distinct: list[tuple[str, ...]],
            limit: int) -> list[tuple[str, ...]]:
    blocks: dict[tuple[str, ...], int] = {}
    for k in distinct:
        if k and k[-1].isdigit():
            blocks[k[:-1]] = max(blocks.get(k[:-1], 0), int(k[-1]) + 1)
    if not blocks:
        return keys
    others = sum(1 for k in distinct if not (k and k[-1].isdigit()))
    per = max(1, (limit - others) // len(blocks))
    width = {c: max(1, -(-n // per)) for c, n in blocks.items()}
    out = []
    for k in keys:
        w = width.get(k[:-1]) if k and k[-1].isdigit() else None
        if w is None or w == 1:
            out.append(k)
            continue
        lo = int(k[-1]) // w * w
        hi = min(lo + w, blocks[k[:-1]]) - 1
        out.append(k[:-1] + (f"{lo}-{hi}",))
    return out


# ------------------------------------------------------------------------------ metrics
class FlowMeter:
    """Gradient flow of one model at optimizer steps, as a flat dict of logged scalars.

    ``measure()`` at the before-step point: total gradient 2-norm (the norm of all gradients
    together, as ``torch.nn.utils.get_total_norm``), per-group norms and non-finite counts;
    it also keeps a sample of each trainable weight so that ``updates()`` after the step gives
    the per-group ``||w_after - w_before|| / ||w_before||`` (exact for tensors up to 4,096
    entries, estimated from the watch's strided sample above that).
    """

    def __init__(self, named: Sequence[tuple[str, Any]]) -> None:
        import weakref

        self.names = [n for n, _ in named]
        self.refs = [weakref.ref(p) for _, p in named]
        self.groups = layer_groups(self.names)
        self._snap: list[tuple[int, Any, float]] | None = None

    def _params(self) -> list[tuple[int, Any]]:
        out = []
        for i, ref in enumerate(self.refs):
            p = ref()
            if p is not None:
                out.append((i, p))
        return out

    def measure(self, snapshot: bool = True) -> dict[str, float]:
        """Gradient metrics now (one host sync) and, optionally, the weight snapshot."""
        import torch

        with torch.no_grad():
            idx, grads = [], []
            for i, p in self._params():
                g = p.grad
                if g is None:
                    continue
                idx.append(i)
                grads.append(g.coalesce().values() if g.is_sparse else g)
            norms = [torch.linalg.vector_norm(g, 2, dtype=torch.float32) for g in grads]
            host = torch.stack(norms).cpu().tolist() if norms else []
            sq: dict[str, float] = {}
            bad: dict[str, int] = {}
            for i, g, n in zip(idx, grads, host):
                grp = self.groups[i]
                sq[grp] = sq.get(grp, 0.0) + n * n
                if not math.isfinite(n):
                    bad[grp] = bad.get(grp, 0) + int((~torch.isfinite(g)).sum())
            out = {PREFIX + "grad_norm_total": math.sqrt(sum(sq.values()))}
            out.update({f"{PREFIX}grad_norm/{k}": math.sqrt(v) for k, v in sq.items()})
            out[PREFIX + "nonfinite_grads"] = float(sum(bad.values()))
            out.update({f"{PREFIX}nonfinite_grads/{k}": float(v) for k, v in bad.items()})
            if snapshot:
                self._snapshot()
        return out

    def _snapshot(self) -> None:
        from gradtrace.runtime.watch.tensors import geometry, sample, sampled_size

        snap = []
        for i, p in self._params():
            if p.requires_grad and p.numel():
                n = p.numel()
                s = sample(p.detach(), geometry(n)).clone()
                snap.append((i, s, math.sqrt(n / sampled_size(n))))
        self._snap = snap

    def updates(self) -> dict[str, float]:
        """Per-group update-to-weight ratios since :meth:`measure` (empty without one)."""
        import torch

        from gradtrace.runtime.watch.tensors import geometry, sample

        snap, self._snap = self._snap, None
        if not snap:
            return {}
        up: dict[str, float] = {}
        wn: dict[str, float] = {}
        with torch.no_grad():
            vals = []
            for i, before, _ in snap:
                p = self.refs[i]()
                if p is None:
                    return {}
                now = sample(p.detach(), geometry(p.numel()))
                if now.shape != before.shape:
                    return {}
                vals.append(torch.linalg.vector_norm(before - now, dtype=torch.float32))
                vals.append(torch.linalg.vector_norm(before, dtype=torch.float32))
            host = torch.stack(vals).cpu().tolist()
        for k, (i, _, scale) in enumerate(snap):
            grp = self.groups[i]
            up[grp] = up.get(grp, 0.0) + (host[2 * k] * scale) ** 2
            wn[grp] = wn.get(grp, 0.0) + (host[2 * k + 1] * scale) ** 2
        return {f"{PREFIX}update_ratio/{g}": math.sqrt(up[g] / wn[g])
                for g in up if wn[g] > 0}
