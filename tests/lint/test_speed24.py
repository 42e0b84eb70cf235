"""Speed cuts of session 24 that must give the answers of the code they replace."""
from __future__ import annotations

import random
import re

from gradtrace.lint.rules.numerics._loss_lines import _any_of


def _lines(text: str, starts: list[int]) -> set[int]:
    return {text.count("\n", 0, p) + 1 for p in starts}


def test_one_pattern_finds_the_lines_of_a_search_per_word():
    """GT758's ``_candidate_lines``: the lines where one trie pattern of the words starts a
    match are the lines where a search per word finds one (words that are prefixes, suffixes
    and substrings of each other, a word twice on a line, overlapping words)."""
    words = ["cross_entropy(", "binary_cross_entropy(", "nll_loss(", "loss(", "loss_1(",
             "loss_10(", "crit(", "self.crit(", "F.cross_entropy(", "CrossEntropyLoss("]
    pieces = words + ["x", " ", "\n", "(", ")", "self.", "binary_", "loss_", "1", "0", "=",
                      "cross_", "entropy"]
    rng = random.Random(24)
    for _ in range(300):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 60)))
        chosen = rng.sample(words, rng.randrange(1, len(words)))
        old = sorted(m.start() for w in chosen for m in re.finditer(re.escape(w), text))
        new = [m.start() for m in _any_of(chosen).finditer(text)]
        assert _lines(text, new) == _lines(text, old), (text, chosen)
    assert _any_of([]).search("cross_entropy(x)") is None


def _script(loops: int, bug: bool) -> str:
    """A script of ``loops`` training loops over one optimizer (each clears, runs backward,
    steps), the last one clearing between its backward and its step when ``bug``."""
    out = ["import torch", "model = torch.nn.Linear(2, 1)",
           "opt = torch.optim.SGD(model.parameters(), lr=0.1)"]
    for k in range(loops):
        last = bug and k == loops - 1
        out += [f"for x in data_{k}:", "    opt.zero_grad()" if not last else "    pass",
                "    loss = model(x).sum()", "    loss.backward()"]
        out += ["    opt.zero_grad()"] if last else []
        out += ["    opt.step()"]
    return "\n".join(out) + "\n"


def test_zero_grad_between_backward_and_step_in_a_long_script():
    """GT503's ``_applied`` asks only the steps between a backward and the clearing (by
    line): the bug in the last of many loops is found at its line, and the earlier loops'
    backwards (applied by their own steps) are not taken for its gradients."""
    from gradtrace.lint import check_source
    for loops in (1, 2, 7):
        bad = _script(loops, True)
        line = bad.splitlines().index("    opt.zero_grad()", len(bad.splitlines()) - 3) + 1
        got = [(f.line, f.code) for f in check_source(bad, "s.py", select=["GT503"])]
        assert got == [(line, "GT503")], (loops, got)
        assert not check_source(_script(loops, False), "s.py", select=["GT503"])
