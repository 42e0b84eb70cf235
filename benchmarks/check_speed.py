"""gradtrace check vs bare read + ast.parse on real PyTorch code, in one run.

    bash benchmarks/get_corpus.sh            # once: real sources into benchmarks/corpus/src
    python benchmarks/check_speed.py [PATH ...]

Prints CPU seconds for read+parse of every .py file, for `gradtrace check` in one process
(default rules; it reads, prefilters on "torch", parses and checks), their ratio, and the wall
time of `--jobs 2`. The two sides alternate over chunks of 500 files, so that the speed of a
shared machine drifting during the run weighs on both. Goal: single-process check <= 1.5x
read+parse.
"""
from __future__ import annotations

import ast
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CHUNK = 500  # files per turn when the two sides alternate


def py_files(paths: list[str]) -> list[str]:
    out = []
    for p in paths:
        for root, dirs, files in os.walk(p):
            dirs.sort()
            out.extend(os.path.join(root, f) for f in sorted(files) if f.endswith(".py"))
    return out


def read_and_parse(files: list[str]) -> tuple[float, int]:
    start = time.process_time()
    lines = 0
    for f in files:
        with open(f, "rb") as fh:
            data = fh.read()
        lines += data.count(b"\n")
        try:
            ast.parse(data)
        except (SyntaxError, ValueError):
            pass
    return time.process_time() - start, lines


def main() -> int:
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings

    paths = sys.argv[1:] or [os.path.join(HERE, "corpus", "src")]
    if not all(os.path.isdir(p) for p in paths):
        print(f"no corpus at {paths}: run `bash benchmarks/get_corpus.sh` first", file=sys.stderr)
        return 2
    files = py_files(paths)
    for f in files:  # warm the page cache
        with open(f, "rb") as fh:
            fh.read()
    settings = Settings(exclude=())
    # The two sides alternate over chunks of files (in alternating order), so that a change
    # of the shared machine's speed during the run weighs on both alike.
    base = check = 0.0
    lines = findings = 0
    for k in range(0, len(files), CHUNK):
        chunk = files[k:k + CHUNK]
        for side in ((0, 1) if k // CHUNK % 2 == 0 else (1, 0)):
            if side == 0:
                t, n = read_and_parse(chunk)
                base, lines = base + t, lines + n
            else:
                start = time.process_time()
                findings += len(check_paths(chunk, settings, jobs=1).findings)
                check += time.process_time() - start
    start = time.perf_counter()
    check_paths(paths, settings, jobs=2)
    wall2 = time.perf_counter() - start
    start = time.perf_counter()
    check_paths(paths, settings, jobs=1)
    wall1 = time.perf_counter() - start
    print(f"files {len(files)}, lines {lines:,}, default-rule findings {findings} "
          f"({findings / max(lines, 1) * 20000:.2f} per 20k lines)")
    print(f"read + ast.parse (CPU)          {base:7.2f} s")
    print(f"gradtrace check, 1 process (CPU) {check:7.2f} s   = {check / base:.2f}x read+parse")
    print(f"gradtrace check wall: --jobs 1 {wall1:6.2f} s, --jobs 2 {wall2:6.2f} s "
          f"({wall1 / wall2:.2f}x faster)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
