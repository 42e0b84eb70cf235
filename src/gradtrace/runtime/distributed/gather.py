"""Exchange of per-rank records through a per-run directory (see NOTE in ranks.py).

Files: ``rank<r>.json`` (final record), ``beat<r>.json`` (heartbeat: where rank r is, written
by a daemon thread every 0.5 s when it changed) and ``done`` (rank 0 has printed). Writes are
atomic (temp file + rename). Nothing here blocks without a deadline.
"""
from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from gradtrace.env import DDP_DIR as ENV_DIR
from gradtrace.runtime.distributed.info import RankInfo
from gradtrace.runtime.distributed.sweep import sweep_exchanges

LOG = logging.getLogger(__name__)
_POLL = 0.05


def run_key(environ: Any = None) -> str:
    """A name shared by the ranks of one run (and no other run) on one machine."""
    env = os.environ if environ is None else environ
    parts = [env.get(k, "") for k in ("TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT",
                                      "TORCHELASTIC_RESTART_COUNT", "SLURM_JOB_ID",
                                      "SLURM_STEP_ID")]
    if not env.get(ENV_DIR) and not env.get("SLURM_JOB_ID"):
        parts.append(str(os.getppid()))  # the torchrun agent / the mp.spawn parent
    raw = "-".join(p for p in parts if p) or "default"
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in raw)[:120]


class Exchange:
    """The directory of one run, seen from one rank; see
    NOTE [why files, not object collectives] in :mod:`gradtrace.runtime.distributed.ranks`."""

    def __init__(self, info: RankInfo, environ: Any = None) -> None:
        env = os.environ if environ is None else environ
        self.info = info
        self.started = time.time()
        base = Path(env.get(ENV_DIR) or tempfile.gettempdir())
        uid = getattr(os, "getuid", lambda: 0)()
        self.dir = base / f"gradtrace-ddp-{uid}" / run_key(env)
        self.dir.mkdir(parents=True, exist_ok=True)
        if info.rank == 0:  # NOTE [stale folders] in gradtrace.runtime.distributed.sweep
            sweep_exchanges(self.dir.parent, keep=self.dir)
        self.shared = bool(env.get(ENV_DIR))
        local = _int(env.get("LOCAL_WORLD_SIZE"), info.world_size)
        self.group_rank = _int(env.get("GROUP_RANK"), 0)
        # Without a shared directory only the ranks on rank 0's node can meet here.
        self.expected = list(range(info.world_size if self.shared or local <= 0
                                   else min(local, info.world_size)))

    def expects_done(self) -> bool:
        """Whether rank 0 can see this rank's files (same node or a shared directory)."""
        return self.shared or self.group_rank == 0

    # -- writing ------------------------------------------------------------------------
    def _write(self, name: str, data: dict[str, Any]) -> None:
        tmp = self.dir / f".{name}.{os.getpid()}.tmp"
        try:
            tmp.write_text(json.dumps(data), encoding="utf-8")
            os.replace(tmp, self.dir / name)
        except (OSError, TypeError, ValueError) as e:
            LOG.debug("gradtrace: cannot write %s: %s", name, e)

    def write_final(self, record: dict[str, Any]) -> None:
        """This rank's final record."""
        self._write(f"rank{self.info.rank}.json", record)

    def write_beat(self, beat: dict[str, Any]) -> None:
        """This rank's latest position (heartbeat)."""
        self._write(f"beat{self.info.rank}.json", beat)

    def mark_done(self) -> None:
        """Rank 0 has merged and printed: the others may exit."""
        self._write("done", {"started": self.started, "at": time.time()})
        for r in self.expected:
            for name in (f"rank{r}.json", f"beat{r}.json"):
                try:
                    (self.dir / name).unlink()
                except OSError:
                    pass

    # -- reading ------------------------------------------------------------------------
    def _read(self, name: str) -> dict[str, Any] | None:
        try:
            data = json.loads((self.dir / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict):
            return None
        if float(data.get("started", self.started)) < self.started - 600:
            return None  # left over from an older run with the same key
        return data

    def gather(self, own: dict[str, Any] | None, wait: float,
               waited: float | None = None) -> list[dict[str, Any]]:
        """Rank 0: every expected rank's final record, or its last heartbeat at the deadline
        (``own=None``: the parent of spawned ranks, which is none of them)."""
        deadline = time.monotonic() + wait
        got: dict[int, dict[str, Any]] = {} if own is None else {self.info.rank: own}
        while True:
            for r in self.expected:
                if r not in got:
                    rec = self._read(f"rank{r}.json")
                    if rec is not None:
                        got[r] = rec
            if len(got) >= len(self.expected) or time.monotonic() >= deadline:
                break
            time.sleep(_POLL)
        for r in self.expected:
            if r not in got:
                beat = self._read(f"beat{r}.json") or {}
                got[r] = {**beat, "rank": r, "final": False,
                          "status": "no-report", "waited": wait if waited is None else waited}
        return [got[r] for r in sorted(got)]

    def wait_done(self, wait: float) -> bool:
        """Ranks > 0: wait until rank 0 has printed (True) or the deadline passed (False)."""
        deadline = time.monotonic() + wait
        path = self.dir / "done"
        while time.monotonic() < deadline:
            try:
                if path.stat().st_mtime >= self.started - 5:
                    return True
            except OSError:
                pass
            time.sleep(_POLL)
        return False


class Heartbeat:
    """Daemon thread: every 0.5 s, write where the main thread is if it changed."""

    def __init__(self, session: Any, main: threading.Thread, every: float = 0.5) -> None:
        self.session = session
        self.main = main
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gradtrace-heartbeat",
                                        daemon=True)
        self._last: Any = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.beat()
            except Exception:  # never disturb the program
                LOG.debug("gradtrace: heartbeat failed", exc_info=True)

    def beat(self) -> None:
        """Write one heartbeat now (if anything changed)."""
        s = self.session
        where = main_thread_site(self.main)
        counts = s.counts()
        key = (where, tuple(counts.values()))
        if key == self._last or s.exchange is None:
            return
        self._last = key
        s.exchange.write_beat({"rank": s.info.rank, "world": s.info.world_size,
                               "started": s.started, "at": time.time(), "counts": counts,
                               "where": list(where) if where else None, "final": False,
                               **s.trail()})


def main_thread_site(main: threading.Thread) -> tuple[str, int, str] | None:
    """(file, line, function) of the innermost user frame the main thread is running."""
    from gradtrace.runtime.frames import is_internal

    frame = sys._current_frames().get(main.ident or -1)
    while frame is not None:
        code = frame.f_code
        if not is_internal(code) and not code.co_filename.startswith("<"):
            return (code.co_filename, frame.f_lineno, code.co_name)
        frame = frame.f_back
    return None


def _int(value: Any, default: int) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return default
