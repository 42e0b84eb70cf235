"""Ranks started by ``torch.multiprocessing.spawn``: each child traced, one report in the parent.

# NOTE [spawned ranks]
``gradtrace run train.py`` where ``train.py`` calls ``torch.multiprocessing.spawn(fn, args,
nprocs=N)`` (or ``start_processes``): while the program runs, the parent's rank session
replaces torch.multiprocessing's ``start_processes`` so that each child runs ``fn(i, *args)``
under its own tracer and a rank session for rank ``i`` of ``N`` (the same hooks, counters,
DDP facts and heartbeats as a rank under torchrun). A child writes its final record (plain
findings, counters, the facts behind a DDP or collective error, which of its findings explain
its crash) into a fresh directory made for that spawn call, and never prints. The parent, which
prints and writes ``--json-out``, reads the records when the program ends, merges them as rank 0
does under torchrun (:func:`gradtrace.runtime.distributed.merge.merge_records`), and leads with the
merged diagnosis instead of its own reading of ``ProcessRaisedException`` (which only carries
one child's traceback text). A child killed before it wrote its record (torch terminates the
others when one fails) is reported from its last heartbeat: where it was. Only the ``spawn``
and ``forkserver`` start methods are traced (a forked child shares the parent's tracer).
The child's ``fn``, ``args`` and return value are the program's own, unchanged.
"""
from __future__ import annotations

import functools
import os
import shutil
import signal
import tempfile
from typing import Any

from gradtrace.env import DDP_DIR
from gradtrace.findings import Finding

_NAMES = ("start_processes",)


class SpawnWatch:
    """Replaces ``torch.multiprocessing(.spawn).start_processes`` while a session is open."""

    def __init__(self) -> None:
        self.spawns: list[tuple[str, int]] = []  # (directory, nprocs) per traced spawn call
        self._saved: list[tuple[Any, str, Any]] = []

    def install(self) -> None:
        import sys

        sp = sys.modules.get("torch.multiprocessing.spawn")
        if sp is None or not callable(getattr(sp, "start_processes", None)):
            return
        orig = sp.start_processes
        wrapper = functools.wraps(orig)(functools.partial(_start_processes, self, orig))
        for mod in (sp, sys.modules.get("torch.multiprocessing")):
            if mod is not None and getattr(mod, "start_processes", None) is orig:
                self._saved.append((mod, "start_processes", orig))
                setattr(mod, "start_processes", wrapper)

    def remove(self) -> None:
        while self._saved:
            mod, name, orig = self._saved.pop()
            setattr(mod, name, orig)

    def records(self, wait: float = 0.5) -> list[tuple[int, list[dict[str, Any]]]]:
        """(world size, every rank's record or last heartbeat) per spawn call that reported."""
        from gradtrace.runtime.distributed.gather import Exchange
        from gradtrace.runtime.distributed.ranks import RankInfo

        out = []
        for folder, n in self.spawns:
            try:
                ex = Exchange(RankInfo(0, n, 0), {DDP_DIR: folder})
            except OSError:
                continue
            recs = ex.gather(None, wait)
            if any(r.get("final") or r.get("where") for r in recs):
                out.append((n, recs))
        return out

    def reported(self) -> bool:
        """Whether a traced child wrote anything (a record or a heartbeat)."""
        for folder, _ in self.spawns:
            for _root, _dirs, files in os.walk(folder):
                if any(f.endswith(".json") for f in files):
                    return True
        return False

    def cleanup(self) -> None:
        for folder, _ in self.spawns:
            shutil.rmtree(folder, ignore_errors=True)
        self.spawns.clear()


def _start_processes(watch: SpawnWatch, orig: Any, fn: Any, args: Any = (), nprocs: int = 1,
                     join: bool = True, daemon: bool = False,
                     start_method: str = "spawn") -> Any:
    if start_method == "fork" or not isinstance(nprocs, int) or nprocs < 1:
        return orig(fn, args, nprocs, join, daemon, start_method)
    try:
        folder = tempfile.mkdtemp(prefix="gradtrace-spawn-")
    except OSError:
        return orig(fn, args, nprocs, join, daemon, start_method)
    watch.spawns.append((folder, nprocs))
    return orig(functools.partial(traced_child, fn, folder, nprocs), args, nprocs, join, daemon,
                start_method)


def traced_child(fn: Any, folder: str, nprocs: int, index: int, *args: Any) -> Any:
    """In a spawned child: ``fn(index, *args)`` under a tracer and a rank session (without
    them, unchanged, if tracing cannot start)."""
    import contextlib

    from gradtrace.runtime.distributed.ranks import RankInfo, rank_session
    from gradtrace.runtime.trace.tracer import diagnose, trace

    stack = contextlib.ExitStack()
    try:
        tracer = stack.enter_context(trace())
        sess = stack.enter_context(rank_session(
            tracer, check_sync=None, info=RankInfo(index, nprocs, index),
            environ={DDP_DIR: folder}))
        sess.to_parent = True
    except Exception:  # gradtrace must never stop the program: run it untraced
        stack.close()
        from gradtrace.runtime.distributed.session import _swallow

        _swallow()
        return fn(index, *args)
    crash: BaseException | None = None
    try:
        with stack:
            try:
                return fn(index, *args)
            except Exception as e:  # SystemExit and Ctrl-C are no crash to diagnose
                crash = e
                diagnose(e, tracer)
                sess.diagnose(e)
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
        from gradtrace.runtime.distributed.session import _swallow

        _swallow()
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)
            if pending:
                os.kill(os.getpid(), signal.SIGTERM)


def from_spawn(exc: BaseException) -> bool:
    """Whether ``exc`` is torch.multiprocessing's report of a failed child."""
    return any(c.__module__ == "torch.multiprocessing.spawn" for c in type(exc).__mro__)


def merged(watch: SpawnWatch) -> tuple[list[Finding], list[Finding]]:
    """(every finding of the spawned ranks, merged and fused; those explaining a crash)."""
    from gradtrace.runtime.distributed.merge import fuse_merged, merge_records

    out: list[Finding] = []
    explains: list[Finding] = []
    for n, recs in watch.records():
        found = fuse_merged(merge_records(recs, n))
        keys = {tuple(k) for r in recs for k in r.get("explains") or ()}
        crashed = any(r.get("status") == "crashed" for r in recs)
        for f in found:
            if f not in out:
                out.append(f)
            if crashed and (f.source != "static" and (
                    f.code.startswith("GT88") or (f.code, f.path, f.line) in keys
                    or any("confirmed at run time (GT88" in x.message for x in f.related))):
                explains.append(f)
    return out, explains
