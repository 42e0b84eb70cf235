"""Removal of the temporary folders that earlier runs of ours left behind.

# NOTE [stale folders]
A run under torchrun or Lightning shares one exchange folder per run
(``gradtrace-ddp-<uid>/<run key>``); rank 0 removes the records once it has printed, but the
``done`` file has to outlive it, because the other ranks wait for it. A spawn parent's folder
(``gradtrace-spawn-<pid>-*``) is removed when the parent finishes, but not when it is killed.
So each new run sweeps what is certainly over: an exchange folder whose newest file is older
than an hour and holds ``done`` (or older than a week without it: a run killed long ago), and a
spawn folder whose parent process is gone. A sweep never raises and never waits.
"""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

_DONE_AGE = 3600.0
_IDLE_AGE = 7 * 86400.0


def sweep_exchanges(base: Path, keep: Path | None = None) -> None:
    """Remove the finished run folders under ``base`` (a ``gradtrace-ddp-<uid>`` folder)."""
    now = time.time()
    try:
        runs = list(base.iterdir())
    except OSError:
        return
    for run in runs:
        if run == keep or not run.is_dir() or run.is_symlink():
            continue
        try:
            names = os.listdir(run)
            newest = max([run.stat().st_mtime] + [(run / n).stat().st_mtime for n in names])
        except (OSError, ValueError):
            continue
        if now - newest > (_DONE_AGE if "done" in names else _IDLE_AGE):
            shutil.rmtree(run, ignore_errors=True)


def spawn_prefix() -> str:
    """The prefix of this process's spawn folders: it names the process that owns them."""
    return f"gradtrace-spawn-{os.getpid()}-"


def sweep_spawns(tmp: str) -> None:
    """Remove the spawn folders under ``tmp`` whose owning process no longer runs."""
    try:
        names = os.listdir(tmp)
    except OSError:
        return
    for name in names:
        pid = _owner(name)
        if pid is None or pid == os.getpid() or _alive(pid):
            continue
        path = os.path.join(tmp, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)


def _owner(name: str) -> int | None:
    if not name.startswith("gradtrace-spawn-"):
        return None
    head = name[len("gradtrace-spawn-"):].split("-", 1)[0]
    return int(head) if head.isdigit() else None


def _alive(pid: int) -> bool:
    if os.name == "nt":
        return True  # os.kill(pid, 0) is not a question there: never sweep
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, ValueError, OverflowError):
        return True  # another user's process, or a pid we cannot ask about: keep
    return True
