"""speed31c: the loop rules' shared gate answers what each rule's own test did, the clearing
words are counted only as far as the test needs, and GT503's skip of the backwards already
applied (``_applied_floor``) and its scan of the backwards between a clear and a step by line
leave its findings as they were, on random training scripts with jumps, branches and two
optimizers."""
import ast
import random

import pytest

from gradtrace.lint import check_source
from gradtrace.lint.config import Settings
from gradtrace.lint.context import Context
from gradtrace.lint.names import Imports
from gradtrace.lint.registry import select_rules
from gradtrace.lint.rules.training_loop import _loop, zero_grad
from gradtrace.lint.rules.training_loop._base import LoopRule, function_text, needs_met

CALLS = ("loss.backward()", "opt.zero_grad()", "opt.step()", "opt2.step()", "opt2.zero_grad()",
         "model.zero_grad()", "loss = crit(model(x), y)", "pass")


def _block(rng: random.Random, depth: int, indent: str, in_loop: bool, in_def: bool) -> list:
    out = []
    for _ in range(rng.randint(1, 5)):
        r = rng.random()
        if depth < 3 and r < 0.15:
            out.append(f"{indent}for x, y in loader:")
            out += _block(rng, depth + 1, indent + "    ", True, in_def)
        elif depth < 3 and r < 0.25:
            out.append(f"{indent}if cond():")
            out += _block(rng, depth + 1, indent + "    ", in_loop, in_def)
            if rng.random() < 0.3:
                out.append(f"{indent}else:")
                out += _block(rng, depth + 1, indent + "    ", in_loop, in_def)
        elif in_loop and r < 0.30:
            out.append(indent + rng.choice(("break", "continue")))
        elif in_def and r < 0.33:
            out.append(indent + rng.choice(("return opt.step()", "return loss.backward()",
                                            "return")))
        else:
            out.append(indent + rng.choice(CALLS) + rng.choice(("", "", "; opt.step()")))
    return out


def _script(rng: random.Random) -> str:
    lines = ["import torch", "opt = torch.optim.SGD(model.parameters(), lr=0.1)",
             "opt2 = torch.optim.Adam(model.parameters())"]
    for _ in range(rng.randint(1, 6)):
        if rng.random() < 0.3:
            lines.append("def train(loader):")
            lines += _block(rng, 1, "    ", False, True)
        else:
            lines += _block(rng, 0, "", False, False)
    return "\n".join(lines) + "\n"


SCRIPTS = [_script(random.Random(seed)) for seed in range(400)]


def _gt503(src: str) -> list:
    return sorted((f.line, f.message) for f in check_source(src, select=["GT503"]))


def test_applied_floor_changes_no_finding(monkeypatch):
    got = [_gt503(s) for s in SCRIPTS]
    assert sum(map(len, got)) > 20  # the scripts do make GT503 findings
    monkeypatch.setattr(zero_grad, "_applied_floor", lambda *a: 0)
    assert got == [_gt503(s) for s in SCRIPTS]


def _facts(src: str):
    tree = ast.parse(src)
    ctx = Context("s.py", src, tree, Imports())
    nodes = [tree] + [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    return ctx, [_loop.facts(ctx, n) for n in nodes]


def test_before_follows_the_lines():
    """``before(a, b)`` only for ``a`` on or before ``b``'s line: the backwards between a clear
    and a step are picked by line."""
    for src in SCRIPTS[:150]:
        _, facts = _facts(src)
        for f in facts:
            stmts = f.scope.stmts
            for a in stmts:
                for b in stmts:
                    if f.before(a, b):
                        assert a.lineno <= b.lineno, src


def test_applied_floor_is_a_line_of_applied_backwards():
    """Every backward before the floor that runs before the clear is applied."""
    checked = 0
    for src in SCRIPTS:
        _, facts = _facts(src)
        for f in facts:
            acc = [b for b in f.backwards if b.accumulates]
            by_line = sorted(f.steps, key=lambda t: t.stmt.lineno)
            lines = [t.stmt.lineno for t in by_line]
            for z in f.zero_grads:
                for s in f.steps:
                    floor = zero_grad._applied_floor(f, z, s, by_line, lines)
                    for b in acc:
                        if b.stmt.lineno < floor and f.before(b.stmt, z.stmt):
                            checked += 1
                            assert zero_grad._applied(f, b, z, s, by_line, lines), src
    assert checked > 100


def test_shared_gate_is_each_rules_wants():
    rules = [r for r in select_rules(*(lambda s: (s.select, s.ignore, s.extend_select))(
        Settings(exclude=()))) if isinstance(r, type) and issubclass(r, LoopRule)]
    assert len(rules) > 20
    for src in SCRIPTS[:60] + ["x = 1\n", "def f(a):\n    a.grad.zero_()\n    sched.step()\n"]:
        ctx, facts = _facts(src)
        for f in facts:
            text = function_text(ctx, f.node)
            for r in rules:
                assert needs_met(ctx, f.node, r.function_needs) == LoopRule.wants(r, text)


@pytest.mark.parametrize("text,n", [("", 0), ("opt.zero_grad()", 1), ("opt.zero_grad()", 0),
                                    ("a.zero_grad(); p.grad = None; b.zero_grad()", 2),
                                    ("a.zero_grad(); p.grad = None; b.zero_grad()", 3),
                                    ("a.zero_grad(); p.grad = None; b.zero_grad()", 4)])
def test_clearing_words_counted_as_far_as_needed(text, n):
    from itertools import islice
    got = sum(1 for _ in islice(_loop.MANUAL_ZERO_RE.finditer(text), n + 1)) != n
    assert got == (len(_loop.MANUAL_ZERO_RE.findall(text)) != n)
