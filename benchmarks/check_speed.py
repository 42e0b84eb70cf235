"""gradtrace check vs bare read + ast.parse on real PyTorch code, in one run.

    bash benchmarks/get_corpus.sh            # once: real sources into benchmarks/corpus/src
    python benchmarks/check_speed.py [PATH ...]
    python benchmarks/check_speed.py --torch # no download: the installed torch package's sources
    python benchmarks/check_speed.py --cache-only [--torch | PATH ...]
    python benchmarks/check_speed.py --quick [PATH ...]  # default: transformers of the corpus

``--quick`` prints the read+parse / check CPU ratio only (no wall times, no cache rounds), by
default on the corpus's transformers tree: a same-minute comparison of two versions
(``PYTHONPATH=... python benchmarks/check_speed.py --quick`` for each).

Every module of ``gradtrace.lint`` is imported before the clock starts (its CPU is printed):
the rules and the analysis modules are imported on first use, inside the first chunk's check,
and where Python writes no bytecode cache (``PYTHONDONTWRITEBYTECODE=1``, as on the project's
machine) each run compiled all ~400 of them there, 0.6-0.7 s charged to the check side
against ~0.13 s with the ``.pyc`` files an installed package has; neither is a cost of
checking files.

Prints CPU seconds for read+parse of every .py file, for `gradtrace check` in one process
(default rules; it reads, prefilters on "torch", parses and checks), their ratio, and the wall
time of `--jobs 2`. The two sides alternate over chunks of 500 files, so that the speed of a
shared machine drifting during the run weighs on both. Goal: single-process check <= 1.5x
read+parse.

# NOTE [fair denominator]: two read+parse sides, two ratios. The check runs with the cyclic
collector off (``_worker``, NOTE [gc] in ``gradtrace/lint/__init__.py``: a gen-1 collection every
``GC_EVERY`` files). The historical side (sessions up to 50) parses with the collector on, in
this process, after the checks have left their long-lived heap here (the project index, caches:
~200 K tracked objects): speed50 clocked half of that side in full collections walking that heap,
so its ratio flatters the check, and anything that changes the heap the check keeps moves it
with the check unchanged. The fair side treats the collector exactly as the check does
(disabled, ``gc.collect(1)`` every ``GC_EVERY`` files), so neither side's figure depends on
what the other left in the process. Chosen over ``gc.freeze()`` of the check's heap with the
collector on: that still charges the collector's passes over the parse's own new trees, which
the check does not pay (in one run at load 4-11 it measured 8.43 s against 7.16 s disabled),
so its ratio would still mix the checker's work with a cost only the parse side has. Same
minutes, load 11 (docs/triage/speed51.md): the fair side 7.58 s, a bare read+parse of each
chunk in a fresh process 6.53 s with the collector off and 7.46 s with it on; the historical
side 15.28 s. Both ratios are printed; the historical one keeps issue 12's history comparable.

Then the cache (`gradtrace.lint.cache`): a cold check into an empty cache folder and a warm
re-check of the unchanged tree, CPU of `check_paths` in this process (one process), repeated
with a fresh folder each round, and the same pair as `gradtrace check` subprocesses (their CPU,
start-up included). Goal: warm <= 0.15x cold, same findings.
"""
from __future__ import annotations

import ast
import gc
import os
import sys
import time

from gradtrace.lint import GC_EVERY

HERE = os.path.dirname(os.path.abspath(__file__))
CHUNK = 500  # files per turn when the sides alternate


def py_files(paths: list[str]) -> list[str]:
    out = []
    for p in paths:
        for root, dirs, files in os.walk(p):
            dirs.sort()
            out.extend(os.path.join(root, f) for f in sorted(files) if f.endswith(".py"))
    return out


def read_and_parse(files: list[str], gc_every: int = 0) -> tuple[float, int]:
    """CPU seconds to read and parse ``files``, and their lines. ``gc_every`` > 0: the cyclic
    collector treated as the check treats it (NOTE [fair denominator])."""
    enabled = gc.isenabled()
    if gc_every:
        gc.disable()
    try:
        start = time.process_time()
        lines = 0
        for n, f in enumerate(files, 1):
            with open(f, "rb") as fh:
                data = fh.read()
            lines += data.count(b"\n")
            try:
                ast.parse(data)
            except (SyntaxError, ValueError):
                pass
            if gc_every and n % gc_every == 0:
                gc.collect(1)
        return time.process_time() - start, lines
    finally:
        if enabled:
            gc.enable()


def report(base: float, fair: float, check: float) -> None:
    """The check's CPU against both read+parse sides (NOTE [fair denominator])."""
    print(f"read + ast.parse (CPU)          {base:7.2f} s   (historical: the collector on)")
    print(f"read + ast.parse, fair (CPU)    {fair:7.2f} s   (the collector as the check has it)")
    print(f"gradtrace check, 1 process (CPU) {check:7.2f} s   = {check / base:.2f}x read+parse "
          f"(historical), {check / fair:.2f}x read+parse (fair)")


def torch_tree() -> str:
    """The folder of the installed torch package (found without importing it)."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("torch is not installed: pass PATH instead of --torch")
    return list(spec.submodule_search_locations)[0]


def cold_warm(paths: list[str], rounds: int = 3) -> None:
    """CPU of a cold check (empty cache) and a warm re-check, in process and as a command."""
    import resource
    import subprocess
    import tempfile

    from gradtrace.lint import check_paths
    from gradtrace.lint.cache import FileCache
    from gradtrace.lint.config import Settings

    settings = Settings(exclude=())
    ratios = []
    for r in range(rounds):
        with tempfile.TemporaryDirectory() as folder:
            times, found = [], []
            for _ in range(2):
                start = time.process_time()
                cache = FileCache.open(settings, folder)
                result = check_paths(paths, settings, jobs=1, cache=cache)
                cache.save(result.cache_entries)
                times.append(time.process_time() - start)
                found.append([f.to_dict() for f in result.findings])
            same = "same findings" if found[0] == found[1] else "FINDINGS DIFFER"
            ratios.append(times[1] / times[0])
            print(f"cache round {r + 1}: cold {times[0]:6.2f} s CPU, warm {times[1]:5.2f} s CPU "
                  f"= {times[1] / times[0]:.3f}x ({len(result.findings)} findings, {same})")
    print(f"warm / cold, in process: {min(ratios):.3f}x-{max(ratios):.3f}x", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        cmd = [sys.executable, "-m", "gradtrace", "check", "--jobs", "1", "--exit-zero", "-q",
               "--no-show-source", "--exclude", "", "--cache-dir", folder, *paths]
        cpu = []
        for _ in range(2):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            done = subprocess.run(cmd, stdout=subprocess.DEVNULL)
            if done.returncode not in (0, 1):
                print(f"(the command exited {done.returncode}: see its errors above)")
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    print(f"`gradtrace check --jobs 1` command: cold {cpu[0]:6.2f} s CPU, warm {cpu[1]:5.2f} s "
          f"CPU = {cpu[1] / cpu[0]:.3f}x (interpreter start-up included)")


def import_all() -> float:
    """Import every module of ``gradtrace.lint`` (the rules and analyses are imported on first
    use); the CPU seconds it took, outside both sides' clocks."""
    import importlib
    import pkgutil

    import gradtrace.lint

    start = time.process_time()
    for m in pkgutil.walk_packages(gradtrace.lint.__path__, "gradtrace.lint."):
        importlib.import_module(m.name)
    return time.process_time() - start


def main() -> int:
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings

    args = sys.argv[1:]
    cache_only = "--cache-only" in args
    quick = "--quick" in args
    paths = [torch_tree() if a == "--torch" else a for a in args
             if a not in ("--cache-only", "--quick")]
    if not paths and quick:
        src = os.path.join(HERE, "corpus", "src")
        paths = [os.path.join(src, d) for d in sorted(os.listdir(src))
                 if d.startswith("transformers")] if os.path.isdir(src) else [src]
    paths = paths or [os.path.join(HERE, "corpus", "src")]
    if not all(os.path.isdir(p) for p in paths):
        print(f"no corpus at {paths}: run `bash benchmarks/get_corpus.sh` first, or pass "
              "--torch (the installed torch package) or a folder", file=sys.stderr)
        return 2
    print(f"corpus: {', '.join(paths)}")
    if cache_only:
        cold_warm(paths)
        return 0
    files = py_files(paths)
    imported = import_all()
    print(f"gradtrace.lint's modules imported first, outside the clocks: {imported:.2f} s CPU")
    for f in files:  # warm the page cache
        with open(f, "rb") as fh:
            fh.read()
    settings = Settings(exclude=())
    # The sides alternate over chunks of files (in alternating order), so that a change of the
    # shared machine's speed during the run weighs on all alike. Side 0 is the historical
    # read+parse (the collector on), side 2 the fair one (NOTE [fair denominator]).
    base = fair = check = 0.0
    lines = findings = 0
    for k in range(0, len(files), CHUNK):
        chunk = files[k:k + CHUNK]
        for side in ((0, 2, 1) if k // CHUNK % 2 == 0 else (1, 2, 0)):
            gc.collect()  # each side starts clean: no side pays for the other's garbage
            if side == 0:
                t, n = read_and_parse(chunk)
                base, lines = base + t, lines + n
            elif side == 2:
                fair += read_and_parse(chunk, GC_EVERY)[0]
            else:
                start = time.process_time()
                findings += len(check_paths(chunk, settings, jobs=1).findings)
                check += time.process_time() - start
    if quick:
        print(f"files {len(files)}, lines {lines:,}, default-rule findings {findings}")
        report(base, fair, check)
        return 0
    start = time.perf_counter()
    check_paths(paths, settings, jobs=2)
    wall2 = time.perf_counter() - start
    start = time.perf_counter()
    check_paths(paths, settings, jobs=1)
    wall1 = time.perf_counter() - start
    print(f"files {len(files)}, lines {lines:,}, default-rule findings {findings} "
          f"({findings / max(lines, 1) * 20000:.2f} per 20k lines)")
    report(base, fair, check)
    print(f"gradtrace check wall: --jobs 1 {wall1:6.2f} s, --jobs 2 {wall2:6.2f} s "
          f"({wall1 / wall2:.2f}x faster)")
    cold_warm(paths)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
