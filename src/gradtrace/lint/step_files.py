"""Which rules may report in a file that holds no training step (NOTE [step files]).

# NOTE [step files]
Most files a check reads are library code: model classes, layers, configs, utilities. They
build no optimizer, run no backward and step nothing, and a rule whose every finding needs
one of those in the file (a training loop's order of backward, step and ``zero_grad``; a
hook that steps the optimizer) can find nothing there. ``Rule.needs_step = True`` is that
promise: the rule reports only in a file whose code (comments and strings out:
NOTE [code text]) holds one of :data:`STEP_WORDS`; in any other file the engine does not make
it active: its visitors never run and its words open no subtree (NOTE [quiet subtrees]).
The words of every rule are still searched: one word plan per list of rules, so the lines a
process has searched (NOTE [line cache]) serve files with and without a step alike (a plan
without the declared rules for step-free files searched each line once per plan). The words
are the ones every such call or construction must spell, as substrings: ``backward`` (``loss.backward()``, ``manual_backward``,
``accelerator.backward(loss)``, ``torch.autograd.backward``), ``autograd`` (``torch.autograd.grad``,
also when imported: the import spells it), ``step`` (``opt.step()``, ``scaler.step(opt)``,
``optimizer_step``, ``training_step``), ``zero_grad``, ``optim`` / ``Optim`` (``torch.optim.Adam``,
an ``Optimizer`` subclass). A test that may say "has a step" too often, never too rarely; when
the code is not ASCII a name may be spelt in characters Python normalises, and the file counts
as one with a step. The promise of each rule is checked by ``tests/lint/test_speed45.py``
against its examples and the real-world cases.
"""
from __future__ import annotations

STEP_WORDS = ("backward", "autograd", "step", "zero_grad", "optim", "Optim")


def holds_step(code: str) -> bool:
    """Whether ``code`` (comments and strings out) may define a training step."""
    return not code.isascii() or any(w in code for w in STEP_WORDS)

