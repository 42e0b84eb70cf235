"""``--check-sync N``: are the gradients equal on every rank after the all-reduce?

Every N optimizer steps (in the step pre-hook, so after backward and its all-reduce), each
rank computes two checksums per parameter of the DDP module seen in forward (sum and L2 norm
of ``.grad`` in float64, 0 for a missing grad), packs ``[v, -v]`` into ONE flat CPU tensor and
runs ONE
``all_reduce(MAX)`` on a private gloo group, which yields the max and the min of every checksum
over the ranks. A parameter whose max and min differ (relative 1e-6) was not synchronised.
The private group keeps these collectives from ever pairing with DDP's own all-reduces. The
check reads gradients only: training is bit-for-bit unchanged.
"""
from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

LOG = logging.getLogger(__name__)
RTOL = 1e-6


class SyncChecker:
    """Runs the check for one :class:`~gradtrace.runtime.distributed.session.RankSession`."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.group: Any = None
        self.count = -1
        self.disabled = False
        self.reported = 0

    def close(self) -> None:
        """Forget the private group (torch destroys groups with the default group)."""
        self.group = None

    def check(self, opt: Any) -> None:
        """Compare this step's gradients across ranks; record a finding if they differ."""
        if self.disabled or self.reported >= 3:
            return
        mode = self.session.tracer.mode
        busy = mode.busy
        mode.busy = True
        try:
            self._check(opt)
        except Exception as e:  # a failed check must not stop training
            self.disabled = True
            LOG.warning("gradtrace: --check-sync disabled after an error: %s", e)
        finally:
            mode.busy = busy

    def _check(self, opt: Any) -> None:
        import torch
        import torch.distributed as dist

        ddp = self.session.ddp()
        if ddp is None or not (dist.is_available() and dist.is_initialized()):
            return  # only DDP replicates parameters (FSDP/ZeRO shard them: not comparable)
        if self.group is None:
            self.group = dist.new_group(backend="gloo", timeout=timedelta(seconds=120))
        # The DDP module's parameters in module order: the same list on every rank, whatever
        # each rank's optimizer holds.
        params = list(ddp.module.parameters())
        if len(params) != self.count:
            n = torch.tensor([len(params), -len(params)], dtype=torch.float64)
            dist.all_reduce(n, op=dist.ReduceOp.MAX, group=self.group)
            if n[0].item() != -n[1].item():
                self.disabled = True
                LOG.warning("gradtrace: --check-sync: ranks have different parameter counts")
                return
            self.count = len(params)
        v = _checksums(params)
        buf = torch.cat([v, -v])
        dist.all_reduce(buf, op=dist.ReduceOp.MAX, group=self.group)
        hi, lo = buf[: len(v)], -buf[len(v):]
        scale = torch.maximum(hi.abs(), lo.abs()).clamp_min(1e-30)
        bad = ((hi - lo).abs() > RTOL * scale).view(2, -1).any(dim=0)
        idx = [int(i) for i in bad.nonzero().flatten()]
        if idx:
            self._record(opt, params, idx, hi[: len(params)], lo[: len(params)])

    def _record(self, opt: Any, params: list[Any], idx: list[int], hi: Any, lo: Any) -> None:
        from gradtrace.runtime.frames import user_line
        from gradtrace.runtime.trace.hooks import param_name

        sess = self.session
        data = sess.tracer.hooks.data
        why, fix = _cause(sess, [params[i] for i in idx])
        names = [_ddp_name(sess, params[i]) or param_name(data, params[i]) for i in idx[:20]]
        for old in sess.sync_facts:
            if old["why"] == why and [p["name"] for p in old["params"]] == names:
                old["count"] = old.get("count", 1) + 1
                return
        site = user_line()
        sess.sync_facts.append({
            "step": sess.progress.steps, "why": why, "fix": fix, "count": 1,
            "site": list(site) if site else None,
            "params": [{"name": n, "lo": float(lo[i]), "hi": float(hi[i])}
                       for n, i in zip(names, idx)]})
        self.reported += 1


def _checksums(params: list[Any]) -> Any:
    import torch

    grads = [p.grad for p in params]
    with torch.no_grad():
        sums = [g.detach().double().sum() if g is not None and not g.is_sparse else
                torch.zeros((), dtype=torch.float64) for g in grads]
        norms = [g.detach().double().norm() if g is not None and not g.is_sparse else
                 torch.zeros((), dtype=torch.float64) for g in grads]
        return torch.stack(sums + norms).cpu()


def _ddp_name(sess: Any, p: Any) -> str:
    ddp = sess.ddp()
    if ddp is None:
        return ""
    for name, q in ddp.module.named_parameters():
        if q is p:
            return name
    return ""


def _cause(sess: Any, bad: list[Any]) -> tuple[str, str]:
    """Why these gradients were not averaged, from what DDP and this session know."""
    ddp = sess.ddp()
    managed = {id(p) for p in getattr(ddp, "_module_parameters", ())}
    if managed and any(id(p) not in managed for p in bad):
        return ("These parameters are not managed by DistributedDataParallel: they were added "
                "to the model after DDP was built (or are in _ddp_params_and_buffers_to_ignore), "
                "so their gradients are never all-reduced.",
                "finish building the model (all layers and parameters) before wrapping it in "
                "DistributedDataParallel")
    if not sess.progress.synced_forward:
        return ("The last forward before this step ran inside ddp.no_sync(), so its backward "
                "did not all-reduce: with gradient accumulation, the last micro-batch of each "
                "step must run outside no_sync().",
                "run the final micro-batch's forward and backward outside `with ddp.no_sync():`")
    return ("DDP all-reduced them, so something changed .grad afterwards on some ranks only "
            "(a hook, per-rank clipping or scaling, or code writing to .grad before step()).",
            "apply the same gradient changes on every rank, or change gradients before the "
            "all-reduce (DDP comm hooks)")
