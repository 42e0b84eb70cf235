"""The real-world table per batch: the development cases and each held-out batch apart.

    python benchmarks/realworld.py --runtime --json /tmp/rw.json
    python benchmarks/realworld_slices.py /tmp/rw.json

A case belongs to the first batch whose boundary commit holds it (``git ls-tree``); the
boundaries are the commits just before and after each held-out batch landed
(docs/triage/heldout*.md). Prints, per batch: static root hits, run top-1 on crash and silent
bugs, and look-alike alarms of both faces. ``--first`` puts each batch's first blind measurement
beside them (``FIRST_CONTACT``: recorded when the batch landed, before any fix built from it;
held-out 5 was first measured after session 10's fixes, the others at their session's main).
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
           ("held-out 21 (session 27)", "b3fc937"),
           ("held-out 22 (session 28)", "616fa433"),
           ("held-out 23 (session 29)", "e8c085e9"),
           ("held-out 24 (session 30)", "3ad354b3"),
           ("held-out 25 (session 31)", "f4e9b876"),
           ("held-out 26 (session 32)", "d6576a6a"),
           ("held-out 27 (session 33)", "0c1c9359"),
           ("held-out 28 (session 34)", "64d11396"),
           ("held-out 29 (session 35)", "f01442fb"),
           ("held-out 30 (session 36)", "9139c3f2"),
           ("held-out 31 (session 37)", "bc4e3722"),
           ("held-out 32 (session 38)", "ae0c7e0c"),
           ("held-out 33 (session 39)", "b68e7cac"),
           ("held-out 34 (session 40)", "c13b075a"),
           ("held-out 35 (session 41)", "c93a284b"),
           ("held-out 36 (session 42)", "ab1b421d"),
           ("held-out 37 (session 43)", "d9d7aab9"),
           ("held-out 38 (session 44)", "43e69a4c"),
           ("held-out 39 (session 45)", "19cfb677"),
           ("held-out 40 (session 46)", "2efba42b"),
           ("held-out 41 (session 47)", "ce6c8449"),
           ("held-out 42 (session 48)", "92fae01f"),
           ("held-out 43 (session 49)", "eafad14a"),
           ("held-out 44 (session 50)", "e20dbe4b"),
           ("held-out 45 (session 51)", "b4a9a389"),
           ("held-out 46 (session 52)", "5285129f"),
           ("held-out 47 (session 53)", "17891a0d"),
           ("held-out 48 (session 54)", "2c14540d"),
           ("held-out 49 (session 55)", "d0254608"),
           ("held-out 50 (session 56)", "c839e584"))


# name -> (static root, run crash, run silent, look-alike alarms static, run) as first measured
FIRST_CONTACT = {
    "held-out 1 (session 6)": ("11/41", "12/18", "7/23", 1, 1),
    "held-out 2 (session 7)": ("5/40", "10/24", "5/16", 0, 1),
    "held-out 3 (session 8)": ("3/42", "5/20", "3/22", 1, 1),
    "held-out 4 (session 9)": ("0/40", "5/21", "2/19", 0, 0),
    "held-out 5 (session 10)": ("3/42", "8/20", "4/22", 0, 0),
    "held-out 6 (session 11)": ("1/40", "5/21", "0/19", 0, 1),
    "held-out 7 (session 13)": ("9/38", "11/19", "12/19", 1, 4),
    "held-out 8 (session 14)": ("14/41", "16/19", "14/22", 1, 1),
    "held-out 9 (session 15)": ("5/36", "7/17", "7/19", 1, 1),
    "held-out 10 (session 16)": ("8/39", "11/19", "10/20", 3, 6),
    "held-out 11 (session 17)": ("5/28", "6/13", "3/15", 0, 2),
    "held-out 12 (session 18)": ("7/26", "7/12", "7/14", 0, 0),
    "held-out 13 (session 19)": ("4/25", "7/10", "3/15", 0, 2),
    "held-out 14 (session 20)": ("4/26", "10/13", "3/13", 3, 3),
    "held-out 15 (session 21)": ("4/26", "6/12", "3/14", 1, 1),
    "held-out 16 (session 22)": ("2/22", "4/10", "2/12", 0, 2),
    "held-out 17 (session 23)": ("4/14", "3/5", "4/9", 1, 2),
    "held-out 18 (session 24)": ("0/11", "4/6", "2/5", 0, 0),
    "held-out 20 (session 26)": ("5/15", "2/4", "4/11", 0, 0),
    "held-out 21 (session 27)": ("0/11", "3/5", "1/6", 0, 2),
    "held-out 22 (session 28)": ("0/11", "2/4", "1/7", 0, 1),
    "held-out 23 (session 29)": ("0/7", "2/3", "1/4", 1, 1),
    "held-out 24 (session 30)": ("3/14", "2/5", "2/9", 1, 2),
    "held-out 25 (session 31)": ("2/12", "1/4", "4/8", 1, 1),
    "held-out 26 (session 32)": ("3/11", "2/3", "3/8", 0, 1),
    "held-out 27 (session 33)": ("2/11", "3/5", "3/6", 4, 2),
    "held-out 28 (session 34)": ("0/12", "2/4", "0/8", 0, 2),
    "held-out 29 (session 35)": ("0/12", "2/4", "3/8", 1, 1),
    "held-out 30 (session 36)": ("1/12", "1/3", "1/9", 2, 1),
    "held-out 31 (session 37)": ("0/12", "1/4", "2/8", 0, 0),
    "held-out 32 (session 38)": ("2/12", "2/5", "2/7", 1, 1),
    "held-out 33 (session 39)": ("0/12", "1/5", "3/7", 0, 0),
    "held-out 34 (session 40)": ("2/12", "3/4", "3/8", 0, 2),
    "held-out 35 (session 41)": ("0/12", "1/5", "1/7", 1, 1),
    "held-out 36 (session 42)": ("1/12", "4/5", "3/7", 0, 1),
    "held-out 37 (session 43)": ("1/11", "1/4", "4/7", 1, 1),
    "held-out 38 (session 44)": ("1/12", "0/5", "2/7", 0, 1),
    "held-out 39 (session 45)": ("2/12", "3/5", "1/7", 0, 0),
    "held-out 40 (session 46)": ("1/12", "1/5", "2/7", 0, 0),
    "held-out 41 (session 47)": ("1/12", "1/5", "0/7", 0, 1),
    "held-out 42 (session 48)": ("2/12", "5/6", "2/6", 0, 0),
    "held-out 43 (session 49)": ("2/9", "1/3", "3/6", 0, 2),
    "held-out 44 (session 50)": ("3/10", "2/5", "2/5", 0, 0),
    "held-out 45 (session 51)": ("3/10", "1/5", "3/5", 1, 1),
    "held-out 46 (session 52)": ("2/9", "2/3", "2/6", 0, 2),
    "held-out 47 (session 53)": ("2/10", "3/5", "3/5", 0, 0),
    "held-out 48 (session 54)": ("4/10", "4/5", "3/5", 0, 0),
    "held-out 49 (session 55)": ("2/10", "0/5", "2/5", 0, 1),
    "held-out 50 (session 56)": ("3/10", "4/5", "3/5", 0, 0),
}


def _cases_at(rev: str) -> set[str]:
    out = subprocess.run(["git", "-C", ROOT_DIR, "ls-tree", "-r", "--name-only", rev,
                          "tests/realworld/cases"], capture_output=True, text=True, check=True)
    return {p for p in out.stdout.split() if p.endswith(".py")}


def _sum(fracs) -> str:
    pairs = [tuple(map(int, f.split("/"))) for f in fracs]
    hit, n = sum(p[0] for p in pairs), sum(p[1] for p in pairs)
    return f"{hit}/{n} ({round(100 * hit / n)}%)" if n else "-"


def main(argv: list[str]) -> int:
    first = "--first" in argv
    argv = [a for a in argv if a != "--first"]
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    try:
        with open(argv[0], encoding="utf-8") as fh:
            res = json.load(fh)
    except (OSError, ValueError) as e:
        print(f"realworld_slices: cannot read {argv[0]}: {e}", file=sys.stderr)
        return 2
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
    if first:
        return _print_first(rows)
    print("| batch | bugs | static root | run crash | run silent | look-alike alarms (static, run) |")
    print("|---|---|---|---|---|---|")
    for n, b, s, ch, c, sh, si, la_s, la_r, la in rows:
        run = f"{ch}/{c}", f"{sh}/{si}"
        print(f"| {n} | {b} | {s}/{b} | {run[0]} | {run[1]} | {la_s}, {la_r} of {la} |")
    return 0


def _print_first(rows: list) -> int:
    """Each held-out batch's first blind measurement beside today's, and the sums of both."""
    print("| batch | first: static root | first: run crash | first: run silent | first: alarms "
          "(static, run) | now: static root | now: run crash | now: run silent | now: alarms |")
    print("|---|---|---|---|---|---|---|---|---|")
    then, now = [], []
    for n, b, s, ch, c, sh, si, la_s, la_r, la in rows:
        if n not in FIRST_CONTACT:
            continue
        fs, fc, fsi, fa_s, fa_r = FIRST_CONTACT[n]
        then.append((fs, fc, fsi, fa_s, fa_r))
        now.append((f"{s}/{b}", f"{ch}/{c}", f"{sh}/{si}", la_s, la_r))
        print(f"| {n} | {fs} | {fc} | {fsi} | {fa_s}, {fa_r} | {s}/{b} | {ch}/{c} | {sh}/{si} "
              f"| {la_s}, {la_r} of {la} |")
    cols = [_sum(x[i] for x in then) for i in range(3)]
    ncols = [_sum(x[i] for x in now) for i in range(3)]
    alarms = sum(x[3] for x in then), sum(x[4] for x in then)
    nalarms = sum(x[3] for x in now), sum(x[4] for x in now)
    print(f"| all held-out batches | {cols[0]} | {cols[1]} | {cols[2]} | {alarms[0]}, {alarms[1]} "
          f"| {ncols[0]} | {ncols[1]} | {ncols[2]} | {nalarms[0]}, {nalarms[1]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
