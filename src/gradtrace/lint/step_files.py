"""Which rules may report in a file that holds no training step (NOTE [step files]).

# NOTE [step files]
Most files a check reads are library code: model classes, layers, configs, utilities. They
build no optimizer, run no backward and step nothing, and a rule whose every finding needs
one of those in the file (a training loop's order of backward, step and ``zero_grad``; a
hook that steps the optimizer) can find nothing there. ``Rule.needs_step = True`` is that
promise: the rule reports only in a file whose code (comments and strings out:
NOTE [code text]) holds one of :data:`STEP_WORDS`; in any other file the engine does not make
it active, so its words are not searched, its visitors never run and its words open no
subtree (NOTE [quiet subtrees]). The words are the ones every such call or construction must
spell, as substrings: ``backward`` (``loss.backward()``, ``manual_backward``,
``accelerator.backward(loss)``, ``torch.autograd.backward``), ``autograd`` (``torch.autograd.grad``,
also when imported: the import spells it), ``step`` (``opt.step()``, ``scaler.step(opt)``,
``optimizer_step``, ``training_step``), ``zero_grad``, ``optim`` / ``Optim`` (``torch.optim.Adam``,
an ``Optimizer`` subclass). A test that may say "has a step" too often, never too rarely; when
the code is not ASCII a name may be spelt in characters Python normalises, and the file counts
as one with a step. The promise of each rule is checked by ``tests/lint/test_speed45.py``
against its examples and the real-world cases.
"""
from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gradtrace.lint.rule import Rule

STEP_WORDS = ("backward", "autograd", "step", "zero_grad", "optim", "Optim")


def holds_step(code: str) -> bool:
    """Whether ``code`` (comments and strings out) may define a training step."""
    return not code.isascii() or any(w in code for w in STEP_WORDS)


@lru_cache(maxsize=16)
def step_free(rules: tuple[type[Rule], ...]
              ) -> tuple[tuple[int, ...], tuple[type[Rule], ...]]:
    """(the positions, the types) of the ``rules`` that may report in a file without a
    training step: one tuple per list of rules, so that the engine's plan of it is cached."""
    keep = tuple(i for i, r in enumerate(rules) if not r.needs_step)
    return keep, tuple(rules[i] for i in keep)
