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
import tempfile
from typing import Any

from gradtrace.env import DDP_DIR
from gradtrace.findings import Finding

_NAMES = ("start_processes",)


class SpawnWatch:
    """Replaces ``torch.multiprocessing(.spawn).start_processes`` while a session is open."""

    def __init__(self, child: Any) -> None:
        self.child = child  # module-level function run in each child (session.traced_child)
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
        from gradtrace.runtime.distributed.info import RankInfo

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
    return orig(functools.partial(watch.child, fn, folder, nprocs), args, nprocs, join,
                daemon, start_method)


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
