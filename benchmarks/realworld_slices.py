"""The real-world table per batch: the development cases and each held-out batch apart.

    python benchmarks/realworld.py --runtime --json /tmp/rw.json
    python benchmarks/realworld_slices.py /tmp/rw.json

A case belongs to the first batch whose boundary commit holds it (``git ls-tree``); the
boundaries are the commits just before and after each held-out batch landed
(docs/triage/heldout*.md). Prints, per batch: static root hits, run top-1 on crash and silent
bugs, and look-alike alarms of both faces.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from realworld import ROOT_DIR, load_cases  # noqa: E402

# (name, commit holding every case of the batch and of those before it)
BATCHES = (("development", "145a32a"), ("held-out 1 (session 6)", "3976443"),
           ("held-out 2 (session 7)", "bd3010a"), ("held-out 3 (session 8)", "4c7cd13^"),
           ("held-out 4 (session 9)", "11f8a23"), ("held-out 5 (session 10)", "da572a9"),
           ("held-out 6 (session 11)", "8e6f098"),
           ("held-out 7 (session 13)", "4649008"), ("held-out 8 (session 14)", "4c32290"),
           ("held-out 9 (session 15)", "e5a57fc"), ("held-out 10 (session 16)", "4170f9e"),
           ("held-out 11 (session 17)", "f2ee1cd"), ("held-out 12 (session 18)", "921d1ab"),
           ("held-out 13 (session 19)", "531828d"),
           ("held-out 14 (session 20)", "b9488bb"),
           ("held-out 15 (session 21)", "4ba28f3"),
           ("held-out 16 (session 22)", "917aaf0"),
           ("held-out 17 (session 23)", "c7b0715"),
           ("held-out 18 (session 24)", "c19d4c0"),
           ("held-out 20 (session 26)", "797b98a"),
           ("held-out 21 (session 27)", "b3fc937"))


def _cases_at(rev: str) -> set[str]:
    out = subprocess.run(["git", "-C", ROOT_DIR, "ls-tree", "-r", "--name-only", rev,
                          "tests/realworld/cases"], capture_output=True, text=True, check=True)
    return {p for p in out.stdout.split() if p.endswith(".py")}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    with open(argv[0], encoding="utf-8") as fh:
        res = json.load(fh)
    static, runtime = res["static"], res.get("runtime") or {}
    seen: set[str] = set()
    rows = []
    for name, rev in BATCHES:
        now = _cases_at(rev)
        mine = now - seen
        seen |= now
        cases = [c for c in load_cases() if c.path in mine]
        bugs = [c for c in cases if c.is_bug]
        crash = [c for c in bugs if c.header.get("symptom") == "crash"]
        silent = [c for c in bugs if c.header.get("symptom") == "silent"]
        look = [c for c in cases if not c.is_bug]

        def hits(cs):
            return sum(bool(runtime.get(c.path, {}).get("hit")) for c in cs)
        rows.append((name, len(bugs), sum(static[c.path]["hit"] for c in bugs if c.path in static),
                     hits(crash), len(crash), hits(silent), len(silent),
                     sum(bool(static.get(c.path, {}).get("findings")) for c in look),
                     sum(bool(runtime.get(c.path, {}).get("count")) for c in look), len(look)))
    print("| batch | bugs | static root | run crash | run silent | look-alike alarms (static, run) |")
    print("|---|---|---|---|---|---|")
    for n, b, s, ch, c, sh, si, la_s, la_r, la in rows:
        run = f"{ch}/{c}", f"{sh}/{si}"
        print(f"| {n} | {b} | {s}/{b} | {run[0]} | {run[1]} | {la_s}, {la_r} of {la} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
