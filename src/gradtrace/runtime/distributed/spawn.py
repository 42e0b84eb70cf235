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
and ``forkserver`` start methods are traced (a forked child shares the parent's tracer:
NOTE [forked ranks]). The child's ``fn``, ``args`` and return value are the program's own,
unchanged.

# NOTE [forked ranks]
A child forked by ``start_processes(..., start_method="fork")`` runs with a copy of the parent's
tracer, whose record dies with the child: the parent, which reports, never saw the worker run,
and the fuse (NOTE [code that ran] in gradtrace.runtime.ran) dropped every static finding on
the worker's code as code that never ran (mmdetection's `reduce_grads`, a gradient summed over
the ranks, found by the checker on its root line and then left out). Each forked child now
writes, as ``fn`` returns or raises, the line spans of the user code its copy of the tracer saw
run (plain paths and line numbers) into a folder made for that call; once the call has joined
them, the parent adds those spans to its tracer's (``Tracer.forked_spans``) and deletes the
folder. Only the spans come back: a forked child's own runtime findings are still its own.
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
from typing import Any

from gradtrace.env import DDP_DIR, strict
from gradtrace.findings import Finding

_NAMES = ("start_processes",)


class SpawnWatch:
    """Replaces ``torch.multiprocessing(.spawn).start_processes`` while a session is open."""

    def __init__(self, child: Any, tracer: Any = None) -> None:
        self.child = child  # module-level function run in each child (session.traced_child)
        self.tracer = tracer  # the parent's tracer: forked children's spans go to it
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
    if start_method == "fork" and join and watch.tracer is not None:
        return _start_forked(watch, orig, fn, args, nprocs, daemon)
    if start_method == "fork" or not isinstance(nprocs, int) or nprocs < 1:
        return orig(fn, args, nprocs, join, daemon, start_method)
    try:
        folder = _folder()
    except OSError:
        return orig(fn, args, nprocs, join, daemon, start_method)
    watch.spawns.append((folder, nprocs))
    return orig(functools.partial(watch.child, fn, folder, nprocs), args, nprocs, join,
                daemon, start_method)


def _folder() -> str:
    """A new folder for one spawn call, after removing those of killed parents
    (NOTE [stale folders] in :mod:`gradtrace.runtime.distributed.sweep`)."""
    from gradtrace.runtime.distributed.sweep import spawn_prefix, sweep_spawns

    sweep_spawns(tempfile.gettempdir())
    return tempfile.mkdtemp(prefix=spawn_prefix())


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


def _start_forked(watch: SpawnWatch, orig: Any, fn: Any, args: Any, nprocs: Any,
                  daemon: bool) -> Any:
    """NOTE [forked ranks]: the joined call, then the children's spans into the tracer."""
    try:
        folder = _folder()
    except OSError:
        return orig(fn, args, nprocs, True, daemon, "fork")
    try:
        return orig(functools.partial(_forked_child, watch.tracer, fn, folder), args, nprocs,
                    True, daemon, "fork")
    finally:
        _read_spans(watch.tracer, folder)
        shutil.rmtree(folder, ignore_errors=True)


def _forked_child(tracer: Any, fn: Any, folder: str, index: int, *args: Any) -> Any:
    try:
        return fn(index, *args)
    finally:
        try:
            spans = {p: [list(s) for s in v] for p, v in tracer.ran_spans().items()}
            path = os.path.join(folder, f"ran-{os.getpid()}.json")
            with open(path + ".tmp", "w", encoding="utf-8") as out:
                json.dump(spans, out)
            os.replace(path + ".tmp", path)
        except Exception:  # the child's own outcome is the program's: never change it
            _swallow()


def _read_spans(tracer: Any, folder: str) -> None:
    try:
        for name in sorted(os.listdir(folder)):
            if name.startswith("ran-") and name.endswith(".json"):
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    for p, spans in json.load(f).items():
                        tracer.forked_spans.setdefault(p, []).extend(
                            (int(a), int(b)) for a, b in spans)
    except (OSError, ValueError, TypeError, AttributeError):
        _swallow()


def _swallow() -> None:
    if strict():
        raise
    from gradtrace.runtime.distributed.gather import LOG

    LOG.debug("gradtrace: forked ranks' spans lost", exc_info=True)
