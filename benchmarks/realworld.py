"""Real-world gradient bugs: how often gradtrace names the root-cause line.

Every case of ``tests/realworld/cases/<family>/*.py`` is a tiny script written from a public
bug report (its header names the report); a bug marks its root-cause line with ``# ROOT``, a
correct look-alike (``*_ok.py``) has no marker. For every case this script

- runs the static checker on the file and records whether a finding is on the ROOT line and
  how many findings are elsewhere (a look-alike with any finding is an alarm);
- with ``--runtime``, runs ``python -m gradtrace run --json-out`` on it in a subprocess and
  records whether the first runtime finding is on the ROOT line (crash and silent bugs apart;
  a look-alike with any runtime finding is an alarm);

then prints one row per family and the totals.

    python benchmarks/realworld.py [--runtime [--isolated]] [--family F] [--update-baseline]
                                   [--misses] [--verify] [--write-readme] [--json FILE]
                                   [--cases GLOB ...] [--since REV]

``--cases``/``--since`` select a subset (cases matching a glob, or cases added after a git
revision, e.g. a held-out batch) for measuring; they cannot be combined with the baseline.

``--update-baseline`` rewrites ``tests/realworld/baseline.json`` (the static result of every
case, which ``tests/realworld/test_realworld.py`` holds the checker to).
"""
from __future__ import annotations

import argparse
import ast
import io
import json
import os
import subprocess
import sys
import tempfile
import tokenize
from dataclasses import dataclass, field

ROOT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the cases run in subprocesses whose cwd is a temporary folder: a relative PYTHONPATH
# (`PYTHONPATH=src`) would not find this tree there and measure the installed gradtrace instead
if os.environ.get("PYTHONPATH"):
    os.environ["PYTHONPATH"] = os.pathsep.join(
        os.path.abspath(p) for p in os.environ["PYTHONPATH"].split(os.pathsep) if p)
CASES = os.path.join(ROOT_DIR, "tests", "realworld", "cases")
BASELINE = os.path.join(ROOT_DIR, "tests", "realworld", "baseline.json")
FAMILIES = ("graph_breaks", "grad_mode", "leaf", "registration", "freezing", "optimizer_wiring",
            "loop_order", "graph_lifetime", "inplace", "autograd_api", "numerics", "distributed")
HEADER_KEYS = ("source", "kind", "symptom", "verified", "launch")
MARKERS = ("# ROOT", "# SYMPTOM")


@dataclass
class Case:
    path: str  # relative to the repository, with forward slashes
    family: str
    text: str
    header: dict[str, str]
    root: int | None  # line of the `# ROOT` marker
    markers: dict[str, list[int]] = field(default_factory=dict)

    @property
    def is_bug(self) -> bool:
        return self.header.get("kind") == "bug"


def marker_lines(text: str) -> dict[str, list[int]]:
    """Lines whose comment is exactly one of MARKERS (comments found by the tokenizer)."""
    found: dict[str, list[int]] = {m: [] for m in MARKERS}
    if not any(m in text for m in MARKERS):
        return found  # no marker anywhere (every look-alike): no comment can be one
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT and tok.string.strip() in MARKERS:
            found[tok.string.strip()].append(tok.start[0])
    return found


def strip_markers(text: str) -> str:
    """The text without its marker comments (line numbers unchanged)."""
    if not any(m in text for m in MARKERS):
        return text
    lines = text.splitlines(keepends=True)
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT and tok.string.strip() in MARKERS:
            row, col = tok.start
            line = lines[row - 1]
            end = "\n" if line.endswith("\n") else ""
            lines[row - 1] = line[:col].rstrip() + end
    return "".join(lines)


def parse_header(text: str) -> tuple[dict[str, str], str]:
    """The header's keys, and the title; raises ValueError when it is malformed."""
    tree = ast.parse(text)
    doc = ast.get_docstring(tree, clean=True)
    if not doc:
        raise ValueError("no module docstring")
    lines = doc.splitlines()
    title, header = lines[0].strip(), {}
    for line in lines[1:]:
        if not line.strip():
            continue
        key, sep, value = line.partition(":")
        if not sep or key.strip() not in HEADER_KEYS or key.strip() in header:
            raise ValueError(f"bad header line {line!r}")
        header[key.strip()] = value.strip()
    return header, title


def load_cases(family: str | None = None) -> list[Case]:
    out = []
    if not os.path.isdir(CASES):
        return out
    for fam in sorted(os.listdir(CASES)):
        folder = os.path.join(CASES, fam)
        if not os.path.isdir(folder) or (family and fam != family):
            continue
        for name in sorted(os.listdir(folder)):
            if not name.endswith(".py"):
                continue
            full = os.path.join(folder, name)
            with open(full, encoding="utf-8") as fh:
                text = fh.read()
            try:
                header, _ = parse_header(text)
            except (ValueError, SyntaxError):
                header = {}
            marks = marker_lines(text)
            roots = marks["# ROOT"]
            rel = os.path.relpath(full, ROOT_DIR).replace(os.sep, "/")
            out.append(Case(rel, fam, text, header, roots[0] if len(roots) == 1 else None, marks))
    return out


def added_since(rev: str) -> set[str]:
    """Case paths (relative, forward slashes) added after git revision ``rev`` (or untracked)."""
    def git(*args: str) -> list[str]:
        out = subprocess.run(["git", *args], cwd=ROOT_DIR, capture_output=True, text=True,
                             check=True).stdout
        return [line.strip() for line in out.splitlines() if line.strip()]
    rel = os.path.relpath(CASES, ROOT_DIR)
    return {*git("diff", "--name-only", "--diff-filter=A", rev, "--", rel),
            *git("ls-files", "--others", "--exclude-standard", "--", rel)}


def select(cases: list[Case], globs: list[str] | None, since: str | None) -> list[Case]:
    import fnmatch
    if globs:
        cases = [c for c in cases if any(fnmatch.fnmatch(c.path, g) for g in globs)]
    if since:
        added = added_since(since)
        cases = [c for c in cases if c.path in added]
    return cases


def static_result(case: Case, text: str | None = None) -> dict:
    """Static findings of one case: whether one is on the ROOT line, and every (code, line)."""
    from gradtrace.lint import check_source

    found = check_source(case.text if text is None else text, path=case.path)
    pairs = sorted([f.code, f.line] for f in found)
    hit = case.root is not None and any(line == case.root for _, line in pairs)
    return {"hit": hit, "findings": pairs}


def _first_finding(case: Case, findings: list) -> dict:
    full = os.path.join(ROOT_DIR, case.path)
    first = findings[0] if findings else None
    where = None
    if first is not None:
        same = os.path.realpath(first.get("path") or "") == os.path.realpath(full)
        where = [first["code"], first["line"] if same else None, first.get("path")]
    return {"first": where, "count": len(findings),
            "hit": bool(where and case.root is not None and where[1] == case.root)}


def child_env() -> dict[str, str]:
    """This environment with ``PYTHONPATH`` made absolute: the cases run in a temporary
    directory, where ``PYTHONPATH=src`` would name nothing and the children would import
    another tree's gradtrace (the installed one) than the one being measured."""
    env = dict(os.environ)
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) if p else p
                                            for p in env["PYTHONPATH"].split(os.pathsep))
    return env


def launcher(case: Case, tmp: str) -> tuple[list[str], dict[str, str]]:
    """The command prefix and environment a case's ``launch:`` header asks for: ``launch:
    torchrun --nproc-per-node=2`` runs it under ``python -m torch.distributed.run`` (loopback,
    a free port); no header: plain ``python``."""
    import shlex
    import socket

    words = shlex.split(case.header.get("launch", ""))
    if not words or words[0] != "torchrun":
        return [sys.executable], child_env()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    args = ["--master-addr=127.0.0.1", f"--master-port={port}", *words[1:]]
    return [sys.executable, "-m", "torch.distributed.run", *args], {
        **child_env(), "GRADTRACE_DDP_DIR": tmp, "OMP_NUM_THREADS": "1"}


def runtime_result(case: Case, timeout: float = 120) -> dict:
    """First runtime finding of ``gradtrace run`` on the case, in a fresh interpreter."""
    full = os.path.join(ROOT_DIR, case.path)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "findings.json")
        prefix, env = launcher(case, tmp)
        cmd = [*prefix, "-m", "gradtrace", "run", "--quiet", "--json-out", out, full]
        try:
            proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=timeout,
                                  env=env)
        except subprocess.TimeoutExpired:
            return {"first": None, "count": 0, "error": "timeout"}
        try:
            with open(out, encoding="utf-8") as fh:
                findings = json.load(fh)["findings"]
        except (OSError, ValueError, KeyError):
            return {"first": None, "count": 0, "error": f"no JSON (exit {proc.returncode})"}
    return _first_finding(case, findings)


# NOTE [batch]: importing torch costs most of a case's run time, so by default one interpreter
# runs several cases one after the other through gradtrace's own `run` entry point (the same
# code path as `python -m gradtrace run`), restoring the global grad mode and anomaly mode
# between cases (a case that turns anomaly mode on must not run the next ones under it);
# `--isolated` runs each case in its own interpreter. Distributed cases always run alone.
BATCH_DRIVER = """
import json, sys, torch
from gradtrace.runtime.runner import main
for case, dest in zip(sys.argv[1::2], sys.argv[2::2]):
    try:
        main(["--quiet", "--json-out", dest, case])
    except BaseException as exc:
        print("case runner failed:", case, exc, file=sys.stderr)
    torch.set_grad_enabled(True)
    torch.autograd.set_detect_anomaly(False)
"""


def runtime_batch(cases: list[Case], size: int = 12, timeout: float = 900) -> dict:
    """Runtime results for many cases, ``size`` cases per interpreter (NOTE [batch])."""
    results: dict = {}
    alone = [c for c in cases if c.family == "distributed" or "launch:" in c.text[:600]]
    for c in alone:
        results[c.path] = runtime_result(c)
    rest = [c for c in cases if c not in alone]
    for i in range(0, len(rest), size):
        chunk = rest[i:i + size]
        with tempfile.TemporaryDirectory() as tmp:
            args = []
            for n, c in enumerate(chunk):
                args += [os.path.join(ROOT_DIR, c.path), os.path.join(tmp, f"{n}.json")]
            print(f"[{i + len(chunk)}/{len(rest)}] batch", file=sys.stderr, flush=True)
            try:
                subprocess.run([sys.executable, "-c", BATCH_DRIVER, *args], cwd=tmp,
                               capture_output=True, text=True, timeout=timeout, env=child_env())
            except subprocess.TimeoutExpired:
                pass
            for n, c in enumerate(chunk):
                try:
                    with open(os.path.join(tmp, f"{n}.json"), encoding="utf-8") as fh:
                        results[c.path] = _first_finding(c, json.load(fh)["findings"])
                except (OSError, ValueError, KeyError):
                    results[c.path] = runtime_result(c)  # the batch died: run it alone
    return results


def verify_result(case: Case, timeout: float = 60) -> str | None:
    """Run the case with plain ``python``; a problem with its header's claim, or None."""
    full = os.path.join(ROOT_DIR, case.path)
    with tempfile.TemporaryDirectory() as tmp:
        prefix, env = launcher(case, tmp)
        try:
            proc = subprocess.run([*prefix, full], cwd=tmp, capture_output=True, text=True,
                                  timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return "timeout"
    crash = case.is_bug and case.header.get("symptom") == "crash"
    if crash and proc.returncode == 0:
        return "exits 0, but the header says crash"
    if crash and case.header.get("verified", "") not in proc.stderr:
        return f"crashes with another error: {proc.stderr.strip().splitlines()[-1:]}"
    if not crash and proc.returncode != 0:
        return f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}"
    return None


def _pct(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n // d}%)" if d else "-"


def table(cases: list[Case], static: dict, runtime: dict | None) -> str:
    head = ["family", "bugs", "look-alikes", "static root", "static elsewhere"]
    if runtime is not None:
        head += ["run top-1 crash", "run top-1 silent"]
    head += ["look-alike alarms"]
    rows = []
    groups = sorted({c.family for c in cases}, key=lambda f: (f not in FAMILIES, FAMILIES.index(f)
                    if f in FAMILIES else 0, f))
    for fam in [*groups, None]:
        sel = [c for c in cases if fam is None or c.family == fam]
        bugs = [c for c in sel if c.is_bug]
        oks = [c for c in sel if not c.is_bug]
        hits = sum(static[c.path]["hit"] for c in bugs)
        elsewhere = sum(sum(line != c.root for _, line in static[c.path]["findings"])
                        for c in bugs)
        row = [fam or "total", str(len(bugs)), str(len(oks)), _pct(hits, len(bugs)),
               str(elsewhere)]
        alarms = f"{sum(bool(static[c.path]['findings']) for c in oks)} static"
        if runtime is not None:
            for kind in ("crash", "silent"):
                k = [c for c in bugs if c.header.get("symptom") == kind]
                row.append(_pct(sum(runtime[c.path].get("hit", False) for c in k), len(k)))
            alarms += f", {sum(runtime[c.path]['count'] > 0 for c in oks)} run"
        rows.append(row + [alarms])
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    fmt = lambda r: "| " + " | ".join(v.ljust(w) for v, w in zip(r, widths)) + " |"  # noqa: E731
    lines = [fmt(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += [fmt(r) for r in rows]
    return "\n".join(lines)


def misses(cases: list[Case], static: dict, runtime: dict | None) -> str:
    out = []
    for c in cases:
        s = static[c.path]
        if c.is_bug and not s["hit"]:
            out.append(f"static miss  {c.path}:{c.root}  said: {s['findings'] or 'nothing'}")
        if not c.is_bug and s["findings"]:
            out.append(f"static alarm {c.path}  said: {s['findings']}")
        if runtime is not None:
            r = runtime[c.path]
            if c.is_bug and not r.get("hit"):
                out.append(f"run miss     {c.path}:{c.root} ({c.header.get('symptom')})  "
                           f"first: {r['first'] or r.get('error') or 'nothing'}")
            if not c.is_bug and r["count"]:
                out.append(f"run alarm    {c.path}  first: {r['first']}")
    return "\n".join(out)


def write_readme(text: str) -> None:
    path = os.path.join(ROOT_DIR, "README.md")
    with open(path, encoding="utf-8") as fh:
        readme = fh.read()
    start, end = "<!-- realworld-table -->\n", "<!-- /realworld-table -->"
    head, sep, rest = readme.partition(start)
    _, sep2, tail = rest.partition(end)
    if sep and sep2:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(head + start + text + "\n" + end + tail)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runtime", action="store_true", help="also run every case under gradtrace")
    ap.add_argument("--isolated", action="store_true",
                    help="with --runtime, one fresh interpreter per case (slower)")
    ap.add_argument("--family", help="only this family")
    ap.add_argument("--update-baseline", action="store_true",
                    help="rewrite tests/realworld/baseline.json (static results)")
    ap.add_argument("--misses", action="store_true", help="list every miss and alarm")
    ap.add_argument("--verify", action="store_true",
                    help="only run every case with plain python and check its header's claim")
    ap.add_argument("--write-readme", action="store_true",
                    help="put the table into README.md (between the realworld-table markers)")
    ap.add_argument("--json", metavar="FILE", help="write every case's results to FILE")
    ap.add_argument("--cases", action="append", metavar="GLOB",
                    help="only cases whose path matches GLOB (repeatable)")
    ap.add_argument("--since", metavar="REV", help="only cases added after git revision REV")
    ns = ap.parse_args(argv)
    cases = select(load_cases(ns.family), ns.cases, ns.since)
    bad = [c.path for c in cases if not c.header or (c.is_bug and c.root is None)]
    if bad:
        print("malformed cases (header or ROOT marker):\n  " + "\n  ".join(bad), file=sys.stderr)
    if ns.verify:
        problems = [(c.path, verify_result(c)) for c in cases]
        for path, problem in problems:
            print(f"{'ok  ' if problem is None else 'FAIL'} {path}" + (f": {problem}" if problem
                                                                      else ""))
        return 1 if bad or any(p for _, p in problems) else 0
    static = {c.path: static_result(c) for c in cases}
    runtime = None
    if ns.runtime and ns.isolated:
        runtime = {}
        for n, c in enumerate(cases, 1):
            print(f"[{n}/{len(cases)}] {c.path}", file=sys.stderr, flush=True)
            runtime[c.path] = runtime_result(c)
    elif ns.runtime:
        runtime = runtime_batch(cases)
    text = table(cases, static, runtime)
    print(text)
    if ns.write_readme:
        write_readme(text)
    if ns.misses:
        print()
        print(misses(cases, static, runtime))
    if ns.json:
        with open(ns.json, "w", encoding="utf-8") as fh:
            json.dump({"static": static, "runtime": runtime}, fh, indent=1)
    if ns.update_baseline:
        if ns.family or ns.cases or ns.since:
            print("--update-baseline needs every case (drop --family/--cases/--since)",
                  file=sys.stderr)
            return 2
        with open(BASELINE, "w", encoding="utf-8") as fh:
            json.dump(static, fh, indent=1, sort_keys=True)
            fh.write("\n")
        print(f"wrote {os.path.relpath(BASELINE, ROOT_DIR)} ({len(static)} cases)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
