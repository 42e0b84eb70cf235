"""Session 45: rules declare whether they can report in a file without a training step
(NOTE [step files] in gradtrace.lint.step_files), and the engine leaves the others out."""
from __future__ import annotations

import ast
import os
import sys

import pytest

from gradtrace.lint import check_source
from gradtrace.lint.code_text import code_text
from gradtrace.lint.engine import FileChecker
from gradtrace.lint.registry import all_rules
from gradtrace.lint.rule import Bad
from gradtrace.lint.step_files import STEP_WORDS, holds_step

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "benchmarks"))

DECLARED = [r for r in all_rules() if r.needs_step]

# a module that builds a layer in `forward` (GT420's pattern); the tails decide the scope
MODEL = """\
import torch.nn as nn
class Net(nn.Module):
    def forward(self, x):
        return nn.Linear(8, 2)(x)
"""
TRAINS = "def fit(model, x, y):\n    ((model(x) - y) ** 2).mean().backward()\n"
IN_COMMENT = "def fit(model, x, y):\n    return model(x)  # ((model(x) - y) ** 2).mean().backward()\n"
IN_STRING = "def fit(model, x, y):\n    return model(x), 'loss.backward(); opt.step()'\n"


def _codes(src: str) -> list[tuple[str, int]]:
    return sorted((f.code, f.line) for f in check_source(src) if f.code == "GT420")


def test_the_declared_rules() -> None:
    # GT115 left the set in session 47: a model file without a step may be trained by
    # another file of the project (NOTE [trained abroad]); GT119 in session 51: a loss file
    # without a step is backpropagated by its importers (NOTE [returned fresh leaves])
    assert {r.code for r in DECLARED} == {
        "GT117", "GT118", "GT211", "GT220", "GT226", "GT420", "GT423",
        "GT440", "GT445", "GT448", "GT536", "GT547", "GT551", "GT560", "GT580", "GT703",
        "GT724", "GT111", "GT151", "GT230", "GT540", "GT570"}
    assert all(isinstance(r.needs_step, bool) for r in all_rules())


@pytest.mark.parametrize("code, held", [
    (MODEL, False),
    (MODEL + TRAINS, True),
    (MODEL + IN_COMMENT, False),
    (MODEL + IN_STRING, False),
    ("import torch\nopt = torch.optim.SGD(params, lr=0.1)\n", True),
    ("from torch.autograd import grad as g\n", True),
    ("class M(Optimizer):\n    pass\n", True),
    ("def training_step(self, batch, i):\n    return self(batch)\n", True),
    ("p.grad = None\nm.requires_grad_(False)\n", False),
    ("ｂackward = 1\n", True),  # not ASCII: may normalise to a step word
])
def test_holds_step_reads_code_only(code: str, held: bool) -> None:
    assert holds_step(code_text(code)) is held


def test_buggy_twin_and_silent_look_alikes() -> None:
    assert _codes(MODEL + TRAINS) == [("GT420", 4)]  # the file trains: the twin is reported
    assert _codes(MODEL) == []  # no step in the file: not judged (as before)
    assert _codes(MODEL + IN_COMMENT) == []  # a comment never opens the scope
    assert _codes(MODEL + IN_STRING) == []  # nor a string


def _active(src: str) -> set[str]:
    return {r.code for r in FileChecker("t.py", src, ast.parse(src), list(all_rules())).rules}


def test_engine_leaves_declared_rules_out_of_step_free_files() -> None:
    declared = {r.code for r in DECLARED}
    assert "GT420" in _active(MODEL + TRAINS)
    for tail in ("", IN_COMMENT, IN_STRING):
        active = _active(MODEL + tail)
        assert not active & declared
        assert "GT401" in active  # a class-level rule still runs there


@pytest.mark.parametrize("rule", DECLARED, ids=lambda r: r.code)
def test_declaration_holds_on_own_examples(rule: type) -> None:
    """Every Bad example of a rule declared `needs_step` holds a step word in its code."""
    bads = [e for e in rule.examples if isinstance(e, Bad)]
    assert bads
    for e in bads:
        assert holds_step(code_text(e.code)), (rule.code, e.code)


def _unscoped(rule: type) -> type:
    return type(rule.__name__, (rule,), {"needs_step": False})


def test_declaration_holds_on_realworld_and_examples() -> None:
    """Run without the scope, the declared rules report nothing in any step-free file of the
    real-world cases and of every rule's examples (Good ones included)."""
    import realworld_cases  # benchmarks/realworld.py's cases, once per run under xdist

    texts = [c.text for c in realworld_cases.load_cases()]
    texts += [e.code for r in all_rules() for e in r.examples]
    free = [t for t in texts if not holds_step(code_text(t))]
    assert len(free) > 300
    rules = [_unscoped(r) for r in DECLARED]
    for text in free:
        tree = ast.parse(text)
        found = FileChecker("t.py", text, tree, rules).run()
        assert not found, [(f.code, f.line) for f in found]


@pytest.mark.parametrize("code, said", [
    ("opt.step()\n", True), ("step = 1\n", True), ("def optimizer_step(self):\n    pass\n", True),
    ("x.num_steps\n", False), ("step_size = 2\n", False), ("def training_step(s):\n    pass\n",
                                                             False),
    ("a_step + stepper\n", False), ("y = 1\n", False), ("f(step)\n", True),
])
def test_gt547_gate_is_the_whole_word_pattern(code: str, said: bool) -> None:
    """GT547's gate (NOTE [step spelt]) finds `step` / `optimizer_step` as whole words, as the
    pattern `\\b(?:optimizer_)?step\\b` did, with str.find."""
    import re

    from gradtrace.lint.rules.training_loop.parent_step import _may_step

    tree = ast.parse(code)
    ctx = FileChecker("t.py", code, tree, []).ctx
    assert _may_step(ctx) is said
    assert (re.search(r"\b(?:optimizer_)?step\b", code_text(code)) is not None) is said


def test_step_words_are_code_words() -> None:
    assert all(w.isidentifier() for w in STEP_WORDS)
