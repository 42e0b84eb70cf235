"""Instructions, not seconds: an A/B of `gradtrace check` that machine load cannot move.

    python benchmarks/instructions.py [--every N | --slice A:B] TREE_SRC [TREE_SRC ...] --
        PATH [PATH ...]

e.g. ``python benchmarks/instructions.py --every 40 /work/main/src src --
/work/corpora/c1/src/transformers-5.24.0-py3-none-any``. Checks every Nth Python file of the
paths (default every 40th: 73 files of transformers, about a minute each under valgrind) with
each source tree on ``PYTHONPATH`` in turn, under ``valgrind --tool=callgrind``, and prints the
instructions each run executed (Ir), with and without the files (the interpreter start-up and
the imports, measured with no file, are taken off). On the project's shared 2-core machine a
load average of 15 moves CPU seconds by 5-10% between two runs of the same tree; the
instruction count of a run with ``PYTHONHASHSEED=0`` is the same to the last digit (a first
run of a tree may also compile its ``.pyc`` files: run each tree once before comparing). Needs
``valgrind``; runs the interpreter binary itself (``sys.executable``: a pyenv shim would be
traced instead of Python).

``--slice A:B`` checks the files A to B-1 of the paths instead, contiguous, in the order a
check reads them: a sample of every Nth file takes files far apart, which hides what a check
of a whole tree reuses from one file to the next (the engine's per-process tables:
NOTE [line cache] in ``gradtrace.lint.words``); e.g. ``--slice 1200:1290`` of transformers.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile

RUN = """
import gc, sys
from gradtrace.lint import check_file, iter_files
from gradtrace.lint.config import Settings
from gradtrace.lint.registry import select_rules
s = Settings(exclude=())
rules = select_rules(s.select, s.ignore, s.extend_select)
every = sys.argv[1]
files = list(iter_files(sys.argv[2:], s, []))
if ":" in every:
    a, b = every.split(":")
    files = files[int(a or 0):int(b) if b else None]
else:
    files = files[::int(every)] if int(every) else []
gc.disable()
print(len(files), sum(len(check_file(f, rules, s).findings) for f in files))
"""


def instructions(src: str, every: int | str, paths: list[str]) -> tuple[int, str]:
    """(Ir of one run, its output: files checked and findings)."""
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "run.py")
        with open(script, "w") as fh:
            fh.write(RUN)
        env = dict(os.environ, PYTHONPATH=os.path.abspath(src), PYTHONHASHSEED="0")
        got = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg.out",
             sys.executable, script, str(every), *paths],
            env=env, capture_output=True, text=True, check=True)
    m = re.search(r"Collected : (\d+)", got.stderr)
    if m is None:
        raise SystemExit(f"no instruction count from valgrind:\n{got.stderr[-2000:]}")
    return int(m.group(1)), got.stdout.strip()


def main(argv: list[str]) -> int:
    every: int | str = 40
    if argv[:1] == ["--every"]:
        every, argv = int(argv[1]), argv[2:]
    elif argv[:1] == ["--slice"] and ":" in (argv[1:2] or [""])[0]:
        every, argv = argv[1], argv[2:]
    if "--" not in argv:
        print(__doc__)
        return 2
    cut = argv.index("--")
    trees, paths = argv[:cut], argv[cut + 1:]
    for src in trees:
        base, _ = instructions(src, 0, paths)
        total, out = instructions(src, every, paths)
        print(f"{src}: {total / 1e9:.4f} G instructions, {(total - base) / 1e9:.4f} G for the "
              f"files (files, findings: {out})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
