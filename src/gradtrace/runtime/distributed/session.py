"""The per-rank side of the distributed doctor: counters, DDP bookkeeping, the final record.

Installed by :func:`gradtrace.runtime.distributed.ranks.rank_session` next to a tracer. In a
multi-rank launch it adds one global module forward pre-hook (DDP iterations and which
submodules ran in each), one optimizer step pre-hook (steps, the optional sync check) and a
heartbeat thread (where this rank is, every 0.5 s, for hang diagnoses). All are removed on
exit; modules are held by weak reference, tensors never.
"""
from __future__ import annotations

import os
import signal
import threading
import time
import weakref
from types import TracebackType
from typing import Any

from gradtrace.env import GATHER_TIMEOUT, strict, value
from gradtrace.findings import Finding
from gradtrace.runtime.distributed.info import RankInfo
from gradtrace.runtime.frames import user_line
from gradtrace.runtime.loss_listeners import LossListening

_CURRENT: list[RankSession] = []


def current_session() -> RankSession | None:
    """The most recent rank session of this process (kept after exit for the final merge)."""
    return _CURRENT[-1] if _CURRENT else None


class Progress:
    """Plain counters and per-iteration module usage written by the hooks (no tensors)."""

    def __init__(self) -> None:
        self.iteration = 0            # DDP forward passes with grad enabled
        self.steps = 0                # optimizer steps
        self.runs: dict[int, int] = {}       # module id -> runs with grad, this iteration
        self.prev_runs: dict[int, int] = {}  # the same for the previous iteration
        self.calls: dict[int, int] = {}      # module id -> calls in this forward (any mode)
        self.repeat_sites: dict[int, list[tuple[str, int]]] = {}
        self.backward_at_forward = 0  # tracer backward count when the last DDP forward began
        self.skipped: list[tuple[int, tuple[str, int] | None]] = []  # (iteration, forward site)
        self.forward_site: tuple[str, int] | None = None
        self.synced_forward = True    # require_backward_grad_sync at the last DDP forward


class RankSession:
    """Distributed bookkeeping for one tracing session (see :func:`rank_session`)."""

    def __init__(self, tracer: Any, info: RankInfo, check_sync: int,
                 environ: Any = None) -> None:
        self.tracer = tracer
        if info.distributed:  # backward passes are counted per forward: NOTE [trace arming]
            _arm_always(tracer)
        self.environ = environ
        self.info = info
        self.check_sync = check_sync
        self.progress = Progress()
        self.ddp_ref: weakref.ref[Any] | None = None
        self.facts: dict[str, Any] = {}      # the facts behind this rank's DDP diagnosis
        self.sync_facts: list[dict[str, Any]] = []
        self.started = time.time()
        self.status = "running"
        self.print_own = False  # rank > 0 whose rank 0 never reported
        self._handles: list[Any] = []
        self._ddp_type: Any = None
        self._beat: Any = None
        self._sync: Any = None
        self.exchange: Any = None
        self.to_parent = False  # a child of torch.multiprocessing.spawn: NOTE [spawned ranks]
        self.explains: list[list[Any]] = []  # (code, path, line) of this rank's crash diagnosis
        self.explained: list[Finding] = []  # the merged findings that explain the crash
        self.spawn: Any = None
        from gradtrace.runtime.distributed.unsynced import SyncWindow

        self.window = SyncWindow()  # NOTE [steps without all-reduce]
        from gradtrace.runtime.distributed.layout import Layouts

        self.layouts = Layouts()  # NOTE [parameter layout across ranks]

    # -- lifecycle ------------------------------------------------------------------------
    def __enter__(self) -> RankSession:
        _CURRENT[:] = [self]
        if not self.info.distributed:
            from gradtrace.runtime.distributed.spawn import SpawnWatch

            self.spawn = SpawnWatch(traced_child, self.tracer)
            self.spawn.install()
            return self
        from torch.nn.modules import module as mm
        from torch.optim import optimizer as om

        from gradtrace.runtime.distributed.gather import Exchange, Heartbeat

        try:
            from torch.nn.parallel import DistributedDataParallel

            self._ddp_type = DistributedDataParallel
        except ImportError:  # a torch build without distributed support
            self._ddp_type = ()
        self._handles.append(mm.register_module_forward_pre_hook(self._pre))
        self._handles.append(om.register_optimizer_step_pre_hook(self._step_pre))
        self._handles.append(mm.register_module_module_registration_hook(self._registered))
        # the sync flag when each backward begins: NOTE [sync flag turned on after the forward]
        self._handles.append(LossListening(self._backward))
        try:
            self.exchange = Exchange(self.info, self.environ)
            self._beat = Heartbeat(self, threading.main_thread())
            self._beat.start()
        except OSError as e:  # no writable temp dir: no merged report, training goes on
            from gradtrace.runtime.distributed.gather import LOG

            LOG.warning("gradtrace: cannot exchange findings between ranks: %s", e)
            self.exchange = None
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        while self._handles:
            self._handles.pop().remove()
        if self.spawn is not None:
            self.spawn.remove()
        if self._beat is not None:
            self._beat.stop()
            self._beat = None
        if self._sync is not None:
            self._sync.close()
        if self.status == "running":
            self.status = "crashed" if exc_type is not None else "finished"

    # -- hooks ----------------------------------------------------------------------------
    def _backward(self, root: Any) -> None:
        if self.window.flag_off:
            try:
                self.window.backward_started()
            except Exception:  # bookkeeping must never break the program
                _swallow()

    def _pre(self, module: Any, args: Any) -> None:
        try:
            self._count(module)
        except Exception:  # bookkeeping must never break the program
            _swallow()

    def _registered(self, module: Any, name: str, submodule: Any) -> None:
        try:
            site = user_line()
            self.layouts.registered(submodule, site)
            if name == "module" and isinstance(module, self._ddp_type):
                self.window.registered(module, submodule)
                self.layouts.wrapped(submodule, site)
        except Exception:  # bookkeeping must never break the program
            _swallow()

    def _count(self, module: Any) -> None:
        import torch

        pr = self.progress
        if type(module) is self._ddp_type or isinstance(module, self._ddp_type):
            if torch.is_grad_enabled():
                self._on_ddp_forward(module)
            return
        if self.tracer.state.in_backward:  # recomputation (checkpointing) is not a forward
            return
        key = id(module)
        n = pr.calls.get(key, 0) + 1
        pr.calls[key] = n
        if n > 1 and len(pr.repeat_sites.get(key, ())) < 4:
            site = user_line()
            if site is not None:
                pr.repeat_sites.setdefault(key, []).append(site)
        if torch.is_grad_enabled():
            pr.runs[key] = pr.runs.get(key, 0) + 1
            self.window.module_forward(module, user_line)

    def _on_ddp_forward(self, module: Any) -> None:
        pr = self.progress
        backwards = self.tracer.state.backward_count
        if pr.iteration > 0 and backwards == pr.backward_at_forward and len(pr.skipped) < 16:
            pr.skipped.append((pr.iteration, pr.forward_site))
        pr.iteration += 1
        pr.backward_at_forward = backwards
        pr.prev_runs, pr.runs = pr.runs, {}
        pr.calls, pr.repeat_sites = {}, {}
        pr.forward_site = user_line()
        pr.synced_forward = bool(getattr(module, "require_backward_grad_sync", True))
        if self.ddp_ref is None or self.ddp_ref() is not module:
            self.ddp_ref = weakref.ref(module)
        self.window.ddp_forward(module, pr.forward_site)

    def _step_pre(self, opt: Any, args: Any, kwargs: Any) -> None:
        try:
            self._step(opt)
        except Exception:  # bookkeeping must never break the program
            _swallow()

    def _step(self, opt: Any) -> None:
        self.progress.steps += 1
        self.window.step(opt, self.tracer.state.backward_count, self.progress.steps, user_line)
        if self.check_sync and self.progress.steps % self.check_sync == 0:
            from gradtrace.runtime.distributed.sync import SyncChecker

            if self._sync is None:
                self._sync = SyncChecker(self)
            self._sync.check(opt)

    # -- diagnosis and the final merge -------------------------------------------------------
    def ddp(self) -> Any:
        """The DistributedDataParallel module last seen in a forward pass (or None)."""
        return self.ddp_ref() if self.ddp_ref is not None else None

    def diagnose(self, exc: BaseException) -> list[Finding]:
        """This rank's findings for a DDP/collective error; also kept for the merged report."""
        self.status = "crashed"
        try:
            if self._spawned_report(exc):
                return []  # the children's own records explain it
            return self._diagnose(exc)
        except Exception:  # diagnosis must never hide the user's own error
            if strict():
                raise
            return []

    def _diagnose(self, exc: BaseException) -> list[Finding]:
        from gradtrace.runtime.distributed.diagnose import facts_for_error
        from gradtrace.runtime.distributed.merge import findings_from_records

        facts = facts_for_error(self, exc)
        if not facts:
            return []
        self.facts = facts
        found = findings_from_records([self.record([])], self.info.world_size)
        state = self.tracer.state
        state.crash_findings.extend(f for f in found if f not in state.crash_findings)
        return found

    def _spawned_report(self, exc: BaseException) -> bool:
        from gradtrace.runtime.distributed.spawn import from_spawn

        return self.spawn is not None and from_spawn(exc) and self.spawn.reported()

    def counts(self) -> dict[str, int]:
        """DDP forward passes (grad on), backward passes started, optimizer steps."""
        st = self.tracer.state
        return {"forward": self.progress.iteration,
                "backward": st.backward_count + (1 if st.in_backward else 0),
                "steps": self.progress.steps}

    def trail(self) -> dict[str, Any]:
        """The forwards this rank ran without a backward, and where its last backward was
        (also in heartbeats: a rank killed in a collective still tells how it got there)."""
        pr, sites = self.progress, self.tracer.state.backward_sites
        last = sites[-1] if sites else None
        return {"skipped": [[i, list(s) if s else None] for i, s in pr.skipped],
                "backward_site": [last.path, last.line] if last is not None else None}

    def record(self, findings: list[Finding]) -> dict[str, Any]:
        """Everything rank 0 needs from this rank, as JSON-ready plain values."""
        return {"rank": self.info.rank, "world": self.info.world_size, "pid": os.getpid(),
                "started": self.started, "status": self.status, "final": True,
                "counts": self.counts(), **self.trail(),
                "facts": self.facts, "sync": self.sync_facts, "explains": self.explains,
                "unsynced": self.window.facts, "layouts": self.layouts.found,
                "findings": [f.to_dict() for f in findings]}

    def finish(self, findings: list[Finding], crash: BaseException | None) -> list[Finding]:
        """Write this rank's record; on rank 0 wait for the others and merge."""
        from gradtrace.runtime.distributed.merge import (findings_from_records, fuse_merged,
                                                         merge_records, unconfirmed)

        own = [f for f in findings if not _is_ours(f)]
        if self.spawn is not None and self.spawn.spawns:
            return self._finish_spawned(own, crash)
        if not self.info.distributed or self.exchange is None:
            return unconfirmed(findings_from_records([self.record([])], 1), own) + own
        if self.status == "running":
            self.status = "crashed" if crash is not None else "finished"
        rec = self.record(own)
        self.exchange.write_final(rec)
        if self.to_parent:
            return []
        wait = _timeout(5.0 if crash is not None else 30.0)
        if not self.info.is_zero:
            wait = _timeout(30.0) * 1.2 + 1.0  # rank 0 may wait this long for a slow peer
            if not self.exchange.expects_done() or self.exchange.wait_done(wait):
                return []
            if crash is None and not own and not self.facts and not self.sync_facts:
                return []  # nothing to add; rank 0 will report when it finishes
            self.print_own = True
            records = self.exchange.gather(rec, 0.0, wait)  # the others' last heartbeats
            return merge_records(records, self.info.world_size, own_rank=self.info.rank,
                                 note=f"rank 0 did not report within {wait:g} s; "
                                      f"this is rank {self.info.rank}'s own report")
        records = self.exchange.gather(rec, wait)
        try:
            return fuse_merged(merge_records(records, self.info.world_size, own_rank=0))
        finally:
            self.exchange.mark_done()


    def _finish_spawned(self, own: list[Finding], crash: BaseException | None) -> list[Finding]:
        """The parent of spawned ranks: their merged records, then its own findings."""
        from gradtrace.runtime.distributed.merge import findings_from_records
        from gradtrace.runtime.distributed.spawn import from_spawn, merged

        try:
            found, self.explained = merged(self.spawn)
        finally:
            self.spawn.cleanup()
        if found and crash is not None and from_spawn(crash):  # the children's words, not
            told = self.tracer.diagnosis                      # the parent's reading of them
            own = [f for f in own if f not in told]
        base = findings_from_records([self.record([])], 1) if not found else []
        return found + [f for f in base + own if f not in found]


def traced_child(fn: Any, folder: str, nprocs: int, index: int, *args: Any) -> Any:
    """NOTE [spawned ranks] in :mod:`gradtrace.runtime.distributed.spawn`. In a spawned child: ``fn(index, *args)`` under a tracer and a rank session (without
    them, unchanged, if tracing cannot start)."""
    import contextlib

    from gradtrace.env import DDP_DIR
    from gradtrace.runtime.distributed.info import check_sync_every
    from gradtrace.runtime.trace.tracer import diagnose, diagnose_general, trace

    stack = contextlib.ExitStack()
    try:
        tracer = stack.enter_context(trace())
        sess = stack.enter_context(RankSession(
            tracer, RankInfo(index, nprocs, index), check_sync_every(), {DDP_DIR: folder}))
        sess.to_parent = True
    except Exception:  # gradtrace must never stop the program: run it untraced
        stack.close()
        _swallow()
        return fn(index, *args)
    crash: BaseException | None = None
    try:
        with stack:
            try:
                return fn(index, *args)
            except Exception as e:  # SystemExit and Ctrl-C are no crash to diagnose
                crash = e
                found = diagnose(e, tracer, general=False)
                if not sess.diagnose(e) and not found:
                    diagnose_general(e, tracer)  # NOTE [general crash]
                raise
    finally:
        _report(sess, tracer, crash)


def _report(sess: Any, tracer: Any, crash: BaseException | None) -> None:
    """Write this child's final record; a SIGTERM from torch (a peer failed) waits for it."""
    pending: list[int] = []
    try:
        old = signal.signal(signal.SIGTERM, lambda *_: pending.append(1))
    except ValueError:  # not the main thread
        old = None
    try:
        found = tracer.findings
        keys = [[f.code, f.path, f.line] for f in tracer.diagnosis] if crash is not None else []
        sess.explains = keys
        sess.finish(found, crash)
    except Exception:  # the report must never change how the child ends
        _swallow()
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)
            if pending:
                os.kill(os.getpid(), signal.SIGTERM)


def _swallow() -> None:
    if strict():
        raise
    from gradtrace.runtime.distributed.gather import LOG

    LOG.debug("gradtrace: rank bookkeeping failed", exc_info=True)


def _is_ours(f: Finding) -> bool:
    from gradtrace.code_tables.distributed import CODES

    return any(c.code == f.code for c in CODES)


def _timeout(default: float) -> float:
    try:
        return max(0.0, float(value(GATHER_TIMEOUT) or default))
    except ValueError:
        return default


def _arm_always(tracer: Any) -> None:
    """Record every step from now on (NOTE [trace arming]): a DDP program's backward passes
    are counted per forward."""
    arming = getattr(tracer, "arming", None)
    if arming is not None:
        arming.always = True
        if not arming.armed:
            arming.arm()
