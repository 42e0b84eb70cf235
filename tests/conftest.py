"""Shared helpers (the real `gradtrace` command in a subprocess) and suite-wide settings: one
torch thread, each test independent of the ones before it, xdist groups for shared set-ups."""
from __future__ import annotations

import io
import itertools
import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Iterator

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "gradtrace"

# One intra-op thread for torch in this process and in every process a test starts (they
# inherit the environment; torch reads it when imported, and nothing has imported it yet).
# With two, OpenMP's waiting threads spin after every tiny op: on the shared 2-core machine
# the watch tests cost seven times the CPU (tests/watch/test_pace.py: 12 s against 1.6 s).
# The tests' tensors are below torch's parallel grain size: their results are the same bits.
os.environ["OMP_NUM_THREADS"] = "1"
if "torch" in sys.modules:
    sys.modules["torch"].set_num_threads(1)

# Tests start `python -m gradtrace` in temporary folders: a relative PYTHONPATH entry (as in
# `PYTHONPATH=src pytest` from a second checkout) would there name nothing, and the child would
# import whichever gradtrace is installed instead of the one under test.
if os.environ.get("PYTHONPATH"):
    os.environ["PYTHONPATH"] = os.pathsep.join(
        os.path.abspath(p) if p else p for p in os.environ["PYTHONPATH"].split(os.pathsep))


def pytest_configure(config: pytest.Config) -> None:
    """Byte-compile gradtrace once, in the controlling process: the suite starts about 200
    Python processes, and where PYTHONDONTWRITEBYTECODE is set (CI machines) each of them
    would compile every module it imports again (half a second for the rules alone)."""
    if not hasattr(config, "workerinput") and SRC.is_dir():
        import compileall

        compileall.compile_dir(str(SRC), quiet=2)


class CLI:
    """Runs `python -m gradtrace ...` in a folder and returns the CompletedProcess."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd

    def __call__(self, *args: str, input: bytes | None = None, env: dict | None = None
                 ) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "gradtrace", *args], cwd=self.cwd,
                              input=input, capture_output=True, env=env, timeout=120)

    def write(self, name: str, text: str) -> Path:
        p = self.cwd / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return p


class _KeptBytes(io.BytesIO):
    """A captured stream that keeps its bytes when the command closes it (`check --output`,
    `--fix` on stdin close what they wrote to)."""

    def close(self) -> None:
        pass


class InProcessCLI(CLI):
    """`gradtrace.cli.main(args)` in this process, with the folder as working directory and
    stdin, stdout and stderr as byte streams: the same CompletedProcess as :class:`CLI` without
    starting Python (`python -m gradtrace` is `raise SystemExit(main())`). For the tests of what
    a command does; the tests of the entry point itself (exit status, the interpreter's
    streams, process pools, the imports of a fresh process) use :class:`CLI`."""

    def __call__(self, *args: str, input: bytes | None = None, env: dict | None = None
                 ) -> subprocess.CompletedProcess:
        from unittest import mock

        from gradtrace.cli import main

        out, err = _KeptBytes(), _KeptBytes()
        streams = (sys.stdin, sys.stdout, sys.stderr)
        here = os.getcwd()
        sys.stdin = io.TextIOWrapper(_KeptBytes(input or b""), encoding="utf-8")
        sys.stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
        sys.stderr = io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace",
                                      write_through=True)
        try:
            os.chdir(self.cwd)
            with mock.patch.dict(os.environ, env or {}, clear=env is not None):
                try:
                    code = main(list(args))
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os.chdir(here)
            sys.stdin, sys.stdout, sys.stderr = streams
        return subprocess.CompletedProcess(["gradtrace", *args], code, out.getvalue(),
                                           err.getvalue())


@pytest.fixture
def cli(tmp_path: Path) -> CLI:
    """The real `python -m gradtrace` in a subprocess, in tmp_path."""
    return CLI(tmp_path)


@pytest.fixture
def cli_inproc(tmp_path: Path) -> CLI:
    """`gradtrace.cli.main` in this process, in tmp_path (:class:`InProcessCLI`)."""
    return InProcessCLI(tmp_path)


def _dist_helpers():
    """tests/distributed/dist_helpers.py (its ports: one block per xdist worker)."""
    if "dist_helpers" not in sys.modules:
        import importlib.util

        spec = importlib.util.spec_from_file_location(
            "dist_helpers", Path(__file__).parent / "distributed" / "dist_helpers.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules["dist_helpers"] = mod
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return sys.modules["dist_helpers"]


@pytest.fixture(scope="session")
def _rank_server() -> Iterator[subprocess.Popen]:
    """One `tests/distributed/fork_ranks.py` server per test process, torch imported once."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("TORCH_DISTRIBUTED_DEBUG", None)
    proc = subprocess.Popen([sys.executable, str(Path(__file__).parent / "distributed"
                                                 / "fork_ranks.py")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None and json.loads(proc.stdout.readline()) == {"ready": True}
    yield proc
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=30)


@pytest.fixture
def forked(_rank_server: subprocess.Popen):
    """``forked(request)`` -> the exit code of each rank: one request to the rank server
    (its protocol: tests/distributed/fork_ranks.py). Ranks forked from a process that imported
    torch, torch._dynamo and gradtrace once, instead of fresh interpreters (2-5 s of CPU each);
    the tests using it share one worker under ``-n 2`` (``_SHARED_SETUP``)."""

    def run(req: dict) -> list[int]:
        if req.get("world", 1) > 1 and "port" not in req:  # torchrun's environment for ranks
            helpers = _dist_helpers()
            req = {**req, "port": helpers.free_port(), "run_id": uuid.uuid4().hex}
        assert _rank_server.stdin is not None and _rank_server.stdout is not None
        _rank_server.stdin.write(json.dumps(req) + "\n")
        _rank_server.stdin.flush()
        return json.loads(_rank_server.stdout.readline())["codes"]

    return run


@pytest.fixture
def tmp_imports(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """tmp_path, first on ``sys.path``, for a test that imports modules it writes there;
    ``sys.path`` and ``sys.modules`` as the test found them afterwards (``imports_as_found`` of
    tests/imports_as_found.py; every pytest temporary folder counts as the test's)."""
    from imports_as_found import imports_as_found

    with imports_as_found(tmp_path, tmp_path_factory.getbasetemp()) as folder:
        yield folder


# Process-global state one test could leave to the next (the order-dependent failure of
# session 36: `explain(exc)` read the session an earlier test had ended, through
# `last_tracer()`). Under `-n 2` the tests before a given one change from run to run, so no
# test may read such state from another: each starts without an ended session, and whatever a
# test leaves on (a tracer, a rank session, a loss listener, a torch function mode, a global
# module or optimizer hook, grad mode off, anomaly detection on) is undone after it, and named
# in the file $SUITE_LEAK_LOG when that is set (docs/triage/suite37.md lists what it found).
_GLOBAL_HOOKS = {
    "torch.nn.modules.module": ("_global_backward_hooks", "_global_backward_pre_hooks",
                                "_global_forward_hooks", "_global_forward_pre_hooks",
                                # not the flags beside them: torch 2.13 leaves the id of a
                                # removed with_kwargs hook in _global_forward_hooks_with_kwargs
                                "_global_buffer_registration_hooks",
                                "_global_module_registration_hooks",
                                "_global_parameter_registration_hooks"),
    "torch.optim.optimizer": ("_global_optimizer_pre_hooks", "_global_optimizer_post_hooks"),
}


def _left_on() -> list[str]:
    """What is still on after a test, each undone (so that the next test starts clean)."""
    mods = sys.modules
    left = []
    tracer = mods.get("gradtrace.runtime.trace.tracer")
    if tracer is not None and tracer._ACTIVE:
        left.append(f"{len(tracer._ACTIVE)} active gradtrace tracer(s)")
        tracer._ACTIVE.clear()
    session = mods.get("gradtrace.runtime.distributed.session")
    if session is not None and session._CURRENT:
        left.append("an open rank session")
        session._CURRENT.clear()
    listeners = mods.get("gradtrace.runtime.loss_listeners")
    if listeners is not None and listeners.LOSS_LISTENERS:
        left.append("loss listeners")
        listeners.LOSS_LISTENERS.clear()
    torch = mods.get("torch")
    if torch is None:
        return left
    if torch._C._len_torch_function_stack():
        left.append(f"{torch._C._len_torch_function_stack()} torch function mode(s)")
        while torch._C._len_torch_function_stack():
            torch._C._pop_torch_function_stack()
    for module, names in _GLOBAL_HOOKS.items():
        mod = mods.get(module)
        for name in names:
            hooks = getattr(mod, name, None)
            if hooks:
                left.append(f"{module}.{name}")
                hooks.clear()
    if not torch.is_grad_enabled():
        left.append("grad mode off")
        torch.set_grad_enabled(True)
    if torch.is_anomaly_enabled():
        left.append("anomaly detection on")
        torch.set_anomaly_enabled(False)
    return left


_CACHE_DIR = "GRADTRACE_CACHE_DIR"
_TESTS = itertools.count()


# One autouse fixture, no `request` and no `monkeypatch`: the two it replaced (the check cache
# folder, then the state below) cost 0.26 ms of CPU per test to set up and tear down, 3 s of
# the suite's at 11,000 tests (docs/triage/suite48.md); a trivial test costs ~1 ms.
@pytest.fixture(autouse=True)
def _independent_of_earlier_tests(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Each test starts without an earlier test's ended session and with its own check cache
    folder (created only if used), never the repo's; what it leaves on is undone after it."""
    tracer = sys.modules.get("gradtrace.runtime.trace.tracer")
    if tracer is not None:
        tracer._LAST.clear()  # an earlier test's ended session: never this test's `last_tracer()`
    before = os.environ.get(_CACHE_DIR)
    os.environ[_CACHE_DIR] = str(tmp_path_factory.getbasetemp() / "gradtrace_cache"
                                 / str(next(_TESTS)))
    yield
    if before is None:  # as monkeypatch.setenv's undo: a test's own setenv was undone before
        os.environ.pop(_CACHE_DIR, None)
    else:
        os.environ[_CACHE_DIR] = before
    left = _left_on()
    log = os.environ.get("SUITE_LEAK_LOG")
    if left and log:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"{os.environ.get('PYTEST_CURRENT_TEST', '?')}: {', '.join(left)}\n")


# Tests sharing a costly per-process set-up run in one worker under `-n 2 --dist loadgroup`
# (pyproject.toml): the rank server of `forked` (tests/distributed/fork_ranks.py: torch,
# torch._dynamo and gradtrace imported in one more process; the ranks of tests/distributed,
# the Lightning and HF DDP runs, test_warned.py's two runs), test_pytest_plugin.py's
# module-scoped warm-up (every gradtrace module imported) and the in-process Lightning and
# transformers tests (tests/integrations/test_lightning.py, test_transformers.py: lightning
# and pytorch_lightning, ~5 s of CPU, and transformers' Trainer imported by their first test)
# are then paid once instead of once per worker.
_SHARED_SETUP = {"_rank_server": "rank_server", "_warm_imports": "pytester_warm",
                 "_lightning_loaded": "frameworks", "_transformers_loaded": "frameworks"}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """`--dist loadgroup` (pyproject.toml) at a per-test cost that does not grow with the
    number of tests (tests/xdist_sched.py); xdist's own scheduler where that one cannot be
    used (another --dist, an xdist whose scheduler lacks what it builds on)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist_sched import linear_scheduler

    return linear_scheduler(config, log)


_CORPUS_FILE = pytest.StashKey[str]()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config: pytest.Config, specs) -> None:
    """In the controller, before the workers start: the real-world corpus loaded once for all
    of them (tests/realworld_cases.py), when the run collects a test that reads it."""
    import realworld_cases

    if realworld_cases.wanted(config.args, config.invocation_params.dir):
        config.stash[_CORPUS_FILE] = realworld_cases.write_for_workers()


def pytest_unconfigure(config: pytest.Config) -> None:
    path = config.stash.get(_CORPUS_FILE, None)
    if path is not None:
        os.unlink(path)


def _group_of(item: pytest.Item | None) -> str | None:
    mark = item.get_closest_marker("xdist_group") if item is not None else None
    return None if mark is None else mark.kwargs.get("name", (mark.args or (None,))[0])


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """The trees of tests/src_trees.py are dropped once the next test is not of their group."""
    trees = sys.modules.get("src_trees")
    if trees is not None and _group_of(nextitem) != trees.GROUP:
        trees.release()


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for fixture, group in _SHARED_SETUP.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group(group))
                break
