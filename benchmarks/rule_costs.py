"""Where the checker's time goes: CPU seconds per rule (its visitors and the scopes it builds).

    python benchmarks/rule_costs.py [PATH ...]     # default: benchmarks/corpus/src

Each rule is run alone over the corpus (after one warm-up parse of every file), so a rule is
charged for the data-flow scopes it makes the engine build. Prints the rules by cost and the
cost of parsing alone, for comparison.
"""
from __future__ import annotations

import ast
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    from gradtrace.lint.engine import FileChecker
    from gradtrace.lint.registry import all_rules

    paths = sys.argv[1:] or [os.path.join(HERE, "corpus", "src")]
    texts = []
    for p in paths:
        for root, _, files in os.walk(p):
            for f in files:
                if f.endswith(".py"):
                    with open(os.path.join(root, f), "rb") as fh:
                        data = fh.read()
                    if b"torch" in data:
                        texts.append((os.path.join(root, f), data.decode("utf-8", "replace")))
    start = time.process_time()
    trees = []
    for path, text in texts:
        try:
            trees.append((path, text, ast.parse(text)))
        except SyntaxError:
            pass
    parse = time.process_time() - start
    rows = []
    for rule in all_rules():
        start = time.process_time()
        n = 0
        for path, text, tree in trees:
            n += len(FileChecker(path, text, tree, [rule()]).run())
        rows.append((time.process_time() - start, rule.code, rule.name, n))
    start = time.process_time()
    for path, text, tree in trees:
        FileChecker(path, text, tree, []).run()
    empty = time.process_time() - start
    print(f"{len(trees)} files mentioning torch; parse {parse:.2f} s; engine with no rule "
          f"{empty:.2f} s")
    for cost, code, name, n in sorted(rows, reverse=True):
        print(f"{cost:7.2f} s  {cost / parse:5.2f}x parse  {code} {name} ({n} findings)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
