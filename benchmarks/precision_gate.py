"""Precision gate: `gradtrace check` on the gate corpora, diffed against a recorded baseline.

    bash benchmarks/get_corpus.sh /work/corpora/c1          # once
    bash benchmarks/get_gate_corpora.sh /work/corpora/c2    # once
    python benchmarks/precision_gate.py [--tree DIR] [--corpora DIR] [--write-baseline]

Runs the checker of ``--tree`` (default: this checkout; ``PYTHONPATH=TREE/src``) with the default
rules over ``CORPORA/c1/src`` and ``CORPORA/c2/src``, and keys every finding by its code, its path
inside the corpus and the text of its line (stripped), so that a finding moved by an edit of the
code above it stays the same finding. Prints the findings that are NEW against
``benchmarks/gate_baseline.json`` and those that are GONE; exit 1 when something is new. Every
finding of the baseline was read (docs/triage/gate9.md); a new one is a false alarm until someone
reads it. The baseline keeps a hash of each line, not the third-party text.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BASELINE = os.path.join(HERE, "gate_baseline.json")


def _line(path: str, line: int) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for i, text in enumerate(f, 1):
                if i == line:
                    return text.strip()
    except OSError:
        pass
    return ""


def run(tree: str, root: str) -> dict[str, dict]:
    env = dict(os.environ, PYTHONPATH=os.path.join(tree, "src"), GRADTRACE_NO_CACHE="1")
    out = subprocess.run([sys.executable, "-m", "gradtrace", "check", "--format", "json",
                          "--exit-zero", "--jobs", "2", root], env=env, capture_output=True,
                         text=True, check=False)
    if out.returncode not in (0, 1):
        sys.exit(f"precision_gate: gradtrace check failed on {root}:\n{out.stderr[-2000:]}")
    found = {}
    for f in json.loads(out.stdout)["findings"]:
        path, line = f["path"], f["line"]
        path = path if os.path.isabs(path) else os.path.join(os.getcwd(), path)
        rel = os.path.relpath(path, root)
        text = _line(path, line)
        key = "|".join((f["code"], rel, hashlib.sha1(text.encode()).hexdigest()[:12]))
        found[key] = {"code": f["code"], "path": rel, "line": line, "text": text[:120]}
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tree", default=os.path.dirname(HERE))
    ap.add_argument("--corpora", default="/work/corpora")
    ap.add_argument("--write-baseline", action="store_true")
    a = ap.parse_args()
    now: dict[str, dict] = {}
    for name in ("c1", "c2"):
        root = os.path.join(a.corpora, name, "src")
        if not os.path.isdir(root):
            sys.exit(f"precision_gate: no corpus at {root} (see this file's docstring)")
        now.update({f"{name}/{k}": v for k, v in run(a.tree, root).items()})
    if a.write_baseline:
        with open(BASELINE, "w") as f:
            json.dump({k: {"code": v["code"], "path": v["path"]} for k, v in sorted(now.items())},
                      f, indent=1)
            f.write("\n")
        print(f"baseline written: {len(now)} findings")
        return
    with open(BASELINE) as f:
        base = json.load(f)
    new = sorted(set(now) - set(base))
    gone = sorted(set(base) - set(now))
    for k in new:
        v = now[k]
        print(f"NEW  {v['code']} {k.split('/')[0]}/{v['path']}:{v['line']}  {v['text']}")
    for k in gone:
        print(f"GONE {base[k]['code']} {k.split('/')[0]}/{base[k]['path']}")
    print(f"{len(now)} findings: {len(new)} new, {len(gone)} gone (baseline {len(base)})")
    sys.exit(1 if new else 0)


if __name__ == "__main__":
    main()
