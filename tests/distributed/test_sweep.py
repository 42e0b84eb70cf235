"""NOTE [stale folders] in gradtrace.runtime.distributed.sweep: what a new run removes of the
temporary folders earlier runs left behind, and what it must keep."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

from gradtrace.env import DDP_DIR
from gradtrace.runtime.distributed.gather import Exchange
from gradtrace.runtime.distributed.info import RankInfo
from gradtrace.runtime.distributed.sweep import spawn_prefix, sweep_exchanges, sweep_spawns


def _run_folder(base, name, files, age):
    run = base / name
    run.mkdir(parents=True)
    then = time.time() - age
    for f in files:
        (run / f).write_text("{}")
        os.utime(run / f, (then, then))
    os.utime(run, (then, then))
    return run


def test_finished_and_abandoned_runs_go_live_and_recent_ones_stay(tmp_path):
    done_old = _run_folder(tmp_path, "a", ["done"], 2 * 3600)
    done_new = _run_folder(tmp_path, "b", ["done"], 60)  # its other ranks may still read it
    running = _run_folder(tmp_path, "c", ["beat1.json", "rank0.json"], 2 * 86400)  # a hang
    abandoned = _run_folder(tmp_path, "d", ["beat0.json"], 8 * 86400)
    mine = _run_folder(tmp_path, "e", ["done"], 2 * 3600)
    sweep_exchanges(tmp_path, keep=mine)
    assert not done_old.exists() and not abandoned.exists()
    assert done_new.exists() and running.exists() and mine.exists()


def test_a_recent_file_keeps_an_old_run_folder(tmp_path):
    run = _run_folder(tmp_path, "a", ["done"], 2 * 3600)
    (run / "beat1.json").write_text("{}")  # written now
    sweep_exchanges(tmp_path)
    assert run.exists()


def test_rank_zero_sweeps_its_exchange_base_and_other_ranks_do_not(tmp_path):
    env = {DDP_DIR: str(tmp_path), "MASTER_PORT": "1234"}
    ex1 = Exchange(RankInfo(1, 2, 1), env)
    old = _run_folder(ex1.dir.parent, "old-run", ["done"], 2 * 3600)
    Exchange(RankInfo(1, 2, 1), env)
    assert old.exists()
    ex0 = Exchange(RankInfo(0, 2, 0), env)
    assert not old.exists() and ex0.dir.exists()


def test_spawn_folders_of_dead_parents_go_and_live_ones_stay(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = tmp_path / f"gradtrace-spawn-{int(gone.stdout)}-x1"
    live = tmp_path / f"gradtrace-spawn-{os.getppid()}-x2"
    own = tmp_path / f"{spawn_prefix()}x3"
    unnamed = tmp_path / "gradtrace-spawn-abcdef"  # no owner in the name: never ours to judge
    other = tmp_path / f"not-ours-{int(gone.stdout)}"
    for d in (dead, live, own, unnamed, other):
        (d / "sub").mkdir(parents=True)
    sweep_spawns(str(tmp_path))
    assert not dead.exists()
    assert live.exists() and own.exists() and unnamed.exists() and other.exists()


def test_a_spawn_call_sweeps_then_makes_a_folder_named_for_its_process(tmp_path, monkeypatch):
    from gradtrace.runtime.distributed import spawn

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = tmp_path / f"gradtrace-spawn-{int(gone.stdout)}-x1"
    dead.mkdir()
    made = spawn._folder()
    assert os.path.dirname(made) == str(tmp_path)
    assert os.path.basename(made).startswith(f"gradtrace-spawn-{os.getpid()}-")
    assert not dead.exists()


def test_a_sweep_of_a_missing_folder_does_nothing(tmp_path):
    sweep_exchanges(tmp_path / "missing")
    sweep_spawns(str(tmp_path / "missing"))
    assert list(tmp_path.iterdir()) == []
