"""Ranks forked from a process that has already imported torch: a launcher for the tests.

Each `torchrun` launch costs three imports of torch (the agent and two workers, about 2 s of
CPU each on the CI machine), most of the distributed tests' time. This server imports torch and
gradtrace once, then for each request forks one process per rank, gives it the environment
torchrun gives its workers (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR...), runs
``gradtrace run ...`` in it and, like torchrun's agent, sends SIGTERM to the other ranks when one
fails or the time limit passes. As under torchrun's agent (``start_new_session`` and
``os.killpg``), each rank leads a session of its own and the signal goes to its whole process
group: the processes a rank started (``mp.spawn``'s children, an ``mp.Manager()`` server) end
with it instead of being left behind. The server itself never runs a torch operation, so forking
it is safe.

Protocol: one JSON request per line on stdin, ``{"argv", "cwd", "env", "out", "world",
"timeout"}`` and optionally ``"script": true`` (``argv`` is ``python``'s: a script and its
arguments, run as ``__main__``, instead of ``gradtrace``'s) and ``"preload": [module, ...]``
(imported once in a process forked for this request, which then forks the ranks: the HF
Trainer's and Lightning's imports paid once for both ranks, never kept in the server); one JSON
line back, ``{"codes": [exit code per rank]}``. A few tests keep launching
the real `torchrun` (tests/distributed/test_torchrun.py), so the launcher itself stays covered.
"""
from __future__ import annotations

import atexit
import json
import os
import signal
import sys
import time


def _rank(rank: int, req: dict) -> None:
    """In the forked child: become rank ``rank`` and run gradtrace; never returns."""
    code = 1
    try:
        os.setsid()  # torchrun's start_new_session: the rank's children are signalled with it
        os.environ.update(req["env"])
        world = req["world"]
        if world > 1:
            os.environ.update({
                "RANK": str(rank), "LOCAL_RANK": str(rank), "GROUP_RANK": "0",
                "ROLE_RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world),
                "ROLE_WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(req["port"]), "TORCHELASTIC_RUN_ID": req["run_id"]})
        fd = os.open(req["out"], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        os.chdir(req["cwd"])
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        try:
            if req.get("script"):  # as `python script args`
                import runpy

                sys.argv = list(req["argv"])
                sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
                try:
                    runpy.run_path(sys.argv[0], run_name="__main__")
                    code = 0
                except SystemExit:
                    raise
                except BaseException:
                    import traceback

                    traceback.print_exc()
                    code = 1
            else:
                sys.argv = ["gradtrace", *req["argv"]]
                from gradtrace.cli import main

                code = main(req["argv"])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        atexit._run_exitfuncs()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code or 0)


def _signal(pid: int, sig: int) -> None:
    """``sig`` to the process group of a rank not yet waited for (so ``pid`` is still that rank's
    and leads its group), as torchrun's agent does; the rank alone if it has not yet called
    ``setsid``."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        os.kill(pid, sig)


def _launch(req: dict) -> list[int]:
    pids = []
    for rank in range(req["world"]):
        pid = os.fork()
        if pid == 0:
            _rank(rank, req)
        pids.append(pid)
    codes: dict[int, int] = {}
    deadline = time.monotonic() + req["timeout"]
    stopping = False
    while len(codes) < len(pids):
        for pid in pids:
            if pid in codes:
                continue
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                codes[pid] = os.waitstatus_to_exitcode(status)
        failed = any(c != 0 for c in codes.values())
        if (failed or time.monotonic() > deadline) and not stopping:
            stopping = True  # torchrun's agent: the first failure stops the others
            for pid in pids:
                if pid not in codes:
                    _signal(pid, signal.SIGTERM)
            deadline = time.monotonic() + 30
        elif stopping and time.monotonic() > deadline:
            for pid in pids:
                if pid not in codes:
                    _signal(pid, signal.SIGKILL)
        time.sleep(0.02)
    return [codes[pid] for pid in pids]


def _launch_preloaded(req: dict) -> list[int]:
    """:func:`_launch` in a process forked for this request that imports ``req["preload"]``
    first: both ranks inherit the imports, and the server stays as it was."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            import importlib

            for name in req["preload"]:
                importlib.import_module(name)
            codes = _launch(req)
        except BaseException:
            codes = [1] * req["world"]
        os.write(write, json.dumps(codes).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        got = fh.read()
    os.waitpid(pid, 0)
    return json.loads(got) if got else [1] * req["world"]


def serve() -> None:
    import torch  # noqa: F401 - paid once, inherited by every fork
    import torch._dynamo  # noqa: F401 - DDP's constructor imports it (2 s)
    import torch.distributed  # noqa: F401
    import torch.multiprocessing  # noqa: F401
    import torch.nn.parallel  # noqa: F401

    import gradtrace.cli  # noqa: F401
    import gradtrace.runtime.runner  # noqa: F401
    from gradtrace.lint.registry import all_rules

    all_rules()  # the checker that `run` consults for the files that ran

    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        codes = _launch_preloaded(req) if req.get("preload") else _launch(req)
        print(json.dumps({"codes": codes}), flush=True)
    # Every rank has exited and been waited for: nothing is left to clean up, and the
    # interpreter's own shutdown (torch and torch._dynamo torn down) took 3-10 s of the
    # worker's wall time in the session's last teardown.
    os._exit(0)


if __name__ == "__main__":
    serve()
