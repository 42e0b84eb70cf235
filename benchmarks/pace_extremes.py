"""Load-free findings: run a family's real-world cases at the two extremes of the tracer's pace.

A tracer's paced steps depend on the machine's load (NOTE [load-free findings] in
src/gradtrace/runtime/pace.py); ``GRADTRACE_PACE=fewest`` arms none after the warm-up but the
floor, ``GRADTRACE_PACE=every`` arms every step. A case whose findings are the same at both does
not depend on the load. This script runs every case of a family under ``gradtrace run`` (through
``gradtrace.runtime.runner.main``, in batches of 12 cases per process, as
``realworld.py --runtime`` runs them) with the pace forced, keeps every finding (code, line,
file), and compares two such runs with each other and with a reference
(``realworld.py --runtime --json`` output, or the lead's merged ``{"runtime": ...}`` file).

    python benchmarks/pace_extremes.py run --src SRC --family F --pace fewest|every|default \\
        --out OUT.json [--cases GLOB] [--case-list FILE]
    python benchmarks/pace_extremes.py compare A.json [B.json] [--reference REF.json]

``--src`` is the tree whose code runs (a worktree's ``src``, or a ``git archive`` of another
revision); the cases are read from this checkout. ``compare`` prints, per case, a first finding
(code, line) that differs from the reference's, and every case whose whole finding set differs
between A and B (A at ``fewest``, B at ``every``: the load-dependent cases). Multi-process cases
(``launch:`` in the header) are skipped (``realworld.py`` runs them through their launcher); the
distributed family's cases run alone, one ``python -m gradtrace run`` each (their ranks are
armed throughout, NOTE [trace arming]; a difference there is a rank's time limit under load,
GT885/GT886, not the pace).
About 20 minutes a family per extreme on a loaded two-core machine; run at most two at a time.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

ROOT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = os.path.join(ROOT_DIR, "tests", "realworld", "cases")
BATCH = 12

DRIVER = """
import sys, torch
from gradtrace.runtime.runner import main
for case, dest in zip(sys.argv[1::2], sys.argv[2::2]):
    try:
        main(["--quiet", "--json-out", dest, case])
    except BaseException as exc:
        print("case runner failed:", case, exc, file=sys.stderr)
    torch.set_grad_enabled(True)
    torch.autograd.set_detect_anomaly(False)
"""


def _cases(family: str, pattern: str) -> list[str]:
    paths = sorted(glob.glob(os.path.join(CASES, family, pattern)))
    out = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            if "launch:" not in f.read()[:600]:
                out.append(path)
    return out


def run(src: str, family: str, pace: str, out: str, pattern: str,
        case_list: str | None = None) -> None:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(src))
    env.pop("GRADTRACE_PACE", None)
    if pace != "default":
        env["GRADTRACE_PACE"] = pace
    cases = _cases(family, pattern)
    if case_list:
        with open(case_list, encoding="utf-8") as f:
            names = {os.path.basename(line.strip()) for line in f if line.strip()}
        cases = [c for c in cases if os.path.basename(c) in names]
    res: dict[str, object] = {}
    size = 1 if family == "distributed" else BATCH
    for i in range(0, len(cases), size):
        chunk = cases[i:i + size]
        print(f"[{i + len(chunk)}/{len(cases)}]", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            args = []
            for n, case in enumerate(chunk):
                args += [case, os.path.join(tmp, f"{n}.json")]
            cmd = [sys.executable, "-c", DRIVER, *args] if size > 1 else \
                [sys.executable, "-m", "gradtrace", "run", "--quiet", "--json-out", args[1], args[0]]
            try:
                subprocess.run(cmd, cwd=tmp, capture_output=True, text=True,
                               timeout=900 if size > 1 else 120, env=env)
            except subprocess.TimeoutExpired:
                pass
            for n, case in enumerate(chunk):
                key = os.path.relpath(case, ROOT_DIR)
                try:
                    with open(os.path.join(tmp, f"{n}.json"), encoding="utf-8") as f:
                        found = json.load(f)["findings"]
                    res[key] = [[x["code"], x["line"], os.path.basename(x.get("path") or "")]
                                for x in found]
                except (OSError, ValueError, KeyError):
                    res[key] = "error"
        with open(out, "w", encoding="utf-8") as f:
            json.dump(res, f, indent=0)


def _first(found: object) -> tuple | None:
    return tuple(found[0][:2]) if isinstance(found, list) and found else None


def _set(found: object) -> object:
    return found if not isinstance(found, list) else sorted(map(tuple, found))


def compare(a_path: str, b_path: str | None, ref_path: str | None) -> int:
    with open(a_path, encoding="utf-8") as f:
        a = json.load(f)
    b = None
    if b_path:
        with open(b_path, encoding="utf-8") as f:
            b = json.load(f)
    ref = {}
    if ref_path:
        with open(ref_path, encoding="utf-8") as f:
            ref = json.load(f)
        ref = ref.get("runtime", ref)
    moved = differ = 0
    for key, found in a.items():
        if ref_path:
            r = ref.get(key)
            rf = tuple(r["first"][:2]) if r and r.get("first") else None
            if _first(found) != rf:
                moved += 1
                print("vs reference", key, _first(found), "reference", rf)
        if b is not None and key in b and _set(found) != _set(b[key]):
            differ += 1
            print("A/B", key, found, "|", b[key])
    print(f"{len(a)} cases; {moved} first findings differ from the reference; "
          f"{differ} differ between A and B in their whole finding sets")
    return differ


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run a family's cases at a forced pace")
    r.add_argument("--src", required=True, help="the src directory whose code runs")
    r.add_argument("--family", required=True)
    r.add_argument("--pace", choices=["fewest", "every", "default"], required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--cases", default="*.py", help="a glob inside the family's folder")
    r.add_argument("--case-list", help="a file naming the cases to run, one file name a line")
    c = sub.add_parser("compare", help="compare runs with each other and a reference")
    c.add_argument("a")
    c.add_argument("b", nargs="?")
    c.add_argument("--reference")
    args = parser.parse_args()
    if args.cmd == "run":
        run(args.src, args.family, args.pace, args.out, args.cases, args.case_list)
    else:
        compare(args.a, args.b, args.reference)


if __name__ == "__main__":
    main()
