"""Where the checker's time goes: CPU seconds per rule (its visitors and the scopes it builds).

    python benchmarks/rule_costs.py [PATH ...]     # default: benchmarks/corpus/src
    python benchmarks/rule_costs.py --together [PATH ...]

Each rule is run alone over the corpus (after one warm-up parse of every file), so a rule is
charged for the data-flow scopes it makes the engine build. Prints the rules by cost and the
cost of parsing alone, for comparison.

``--together`` checks the files once with every default rule, as ``gradtrace check`` does
(read, torch prefilter, decode, code text, parse, engine set-up, walk, free), and charges the
CPU to those phases and each rule's visitor calls to its rule (a fact shared by several rules
is charged to the first that asks): where a real run spends its time, phases included. The
timing adds about two clock reads per visitor call.
"""
from __future__ import annotations

import ast
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def together(paths: list[str]) -> int:
    """One run of the default rules, its CPU charged to phases and rules (``--together``)."""
    import gc
    from collections import defaultdict

    from gradtrace.lint import decode, iter_files
    from gradtrace.lint.code_text import code_text
    from gradtrace.lint.config import Settings
    from gradtrace.lint.engine import FileChecker
    from gradtrace.lint.registry import select_rules

    clock = time.process_time
    cost: dict[str, float] = defaultdict(float)
    active: dict[str, int] = defaultdict(int)
    call = FileChecker._call

    def charged(self, visitors, node):  # type: ignore[no-untyped-def]
        for i, fn in visitors:
            start = clock()
            call(self, [(i, fn)], node)
            cost[self.rules[i].code] += clock() - start

    FileChecker._call = charged  # type: ignore[method-assign]
    settings = Settings(exclude=())
    rules = select_rules(settings.select, settings.ignore, settings.extend_select)
    files = list(iter_files(paths, settings, []))
    phases = ("read + decode", "code text", "parse", "engine set-up (word search)",
              "engine walk", "rules", "free")
    gc.disable()
    for n, path in enumerate(files, 1):
        t0 = clock()
        with open(path, "rb") as fh:
            data = fh.read()
        if b"torch" not in data:
            cost[phases[0]] += clock() - t0
            continue
        text, problem = decode(data, path)
        t1 = clock()
        cost[phases[0]] += t1 - t0
        if text is None:
            continue
        code = code_text(text)
        t2 = clock()
        cost[phases[1]] += t2 - t1
        if "torch" not in code:
            continue
        try:
            tree = ast.parse(text, filename=path)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        t3 = clock()
        cost[phases[2]] += t3 - t2
        checker = FileChecker(path, text, tree, [r() for r in rules], code)
        t4 = clock()
        cost[phases[3]] += t4 - t3
        for r in checker.rules:
            active[r.code] += 1
        checker.run()
        t5 = clock()
        cost[phases[4]] += t5 - t4  # the rules' share is moved out below
        checker.ctx.release()
        del checker, tree
        if n % 100 == 0:
            gc.collect(1)
        cost[phases[6]] += clock() - t5
    gc.enable()
    FileChecker._call = call  # type: ignore[method-assign]
    ruled = {k: v for k, v in cost.items() if k.startswith("GT")}
    cost[phases[5]] = sum(ruled.values())
    cost[phases[4]] -= cost[phases[5]]
    total = sum(cost[p] for p in phases)
    print(f"{len(files)} files, {total:.2f} s CPU in all")
    for p in phases:
        print(f"{cost[p]:7.2f} s  {cost[p] / total:5.1%}  {p}")
    print("rules, by cost (files where active):")
    for code, c in sorted(ruled.items(), key=lambda kv: -kv[1]):
        print(f"{c:7.3f} s  {code} ({active[code]} files)")
    return 0


def main() -> int:
    from gradtrace.lint.engine import FileChecker
    from gradtrace.lint.registry import all_rules

    if "--together" in sys.argv[1:]:
        return together([a for a in sys.argv[1:] if a != "--together"]
                        or [os.path.join(HERE, "corpus", "src")])
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
