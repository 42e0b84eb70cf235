"""speed34: training rules build no scope in a file that lacks a word every finding of theirs
needs (docs/triage/speed34.md), and still find their bugs where the word is there."""
from __future__ import annotations

import ast
import textwrap

from gradtrace.lint.context import Context
from gradtrace.lint.engine import FileChecker
from gradtrace.lint.names import Imports
from gradtrace.lint.rules._gates import file_says_word
from gradtrace.lint.rules.graph_breaks.numpy_params import NumpyOfTrainableParameter
from gradtrace.lint.rules.grad_mode.grad_in_helper import GradientHelperUnderNoGrad
from gradtrace.lint.rules.grad_mode.no_grad_forward import NoGradForwardOfTrainedModule
from gradtrace.lint.rules.registration.frozen import FrozenGradRead
from gradtrace.lint.rules.registration.other_instance import OptimizerOverOtherInstance
from gradtrace.lint.rules.registration.outside import ModuleOutsideOptimizer

RULES = [NumpyOfTrainableParameter, GradientHelperUnderNoGrad, NoGradForwardOfTrainedModule, FrozenGradRead,
         OptimizerOverOtherInstance, ModuleOutsideOptimizer]

# library files: each rule's triggers are there (`no_grad`, `optim`, `requires_grad`), but not
# the word every finding of it needs (`requires_grad`/`optim`, whole-word `grad`/`backward`,
# `step`, `backward`, `Parameter`)
NO_GRAD = textwrap.dedent('''
    import torch
    from torch import nn

    class Tower(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        @torch.no_grad()
        def forward(self, x):
            return self.fc(x)

    def penalty(model, x):
        out = model(x)
        return out.sum()

    def evaluate(model, x):
        with torch.no_grad():
            return penalty(model, x)
''')
OPTIM = textwrap.dedent('''
    import torch
    from torch import nn
    from .optimization import get_scheduler

    def setup(optim_args):
        net = nn.Linear(4, 2)
        model = nn.Linear(4, 2)
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        for x in range(3):
            model(x)
        return get_scheduler(opt, optim_args)
''')
FROZEN = textwrap.dedent('''
    import torch

    def freeze(model):
        for p in model.conv1.parameters():
            p.requires_grad = False
        for p in model.parameters():
            p.data /= 2
''')
NUMPY = textwrap.dedent('''
    import numpy as np
    import torch
    from torch import nn

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.ParameterList([torch.ones(3)])

        def export(self, x):
            return np.copy(self.scale[0]), np.asarray(x), self.scale[0].numpy()

    def dump(model, x):
        y = model(x)
        return np.array(y), y.numpy()
''')
CASES = [(NUMPY, NumpyOfTrainableParameter), (NO_GRAD, NoGradForwardOfTrainedModule), (NO_GRAD, GradientHelperUnderNoGrad),
         (OPTIM, OptimizerOverOtherInstance), (OPTIM, ModuleOutsideOptimizer),
         (FROZEN, FrozenGradRead)]


def _checked(src: str, rules: list) -> tuple[list[str], int]:
    tree = ast.parse(src)
    checker = FileChecker("f.py", src, tree, rules)
    found = [f.code for f in checker.run()]
    return found, len(checker.ctx._scopes)


def test_no_scope_without_the_words() -> None:
    for src, rule in CASES:
        assert rule.code in {r.code for r in FileChecker("f.py", src, ast.parse(src),
                                                         [rule]).rules}  # active
        assert _checked(src, [rule]) == ([], 0), rule.code


def test_the_bad_examples_still_found() -> None:
    for rule in RULES:
        for ex in rule.examples:
            if type(ex).__name__ == "Bad":
                found, _ = _checked(ex.code, [rule])
                assert found.count(rule.code) == ex.count, (rule.code, ex.code)


def test_whole_word() -> None:
    src = "import torch\nwith torch.no_grad():\n    y = x.grad_fn\n"
    tree = ast.parse(src)
    ctx = Context("f.py", src, tree, Imports(), src)
    assert not file_says_word(ctx, "grad")
    assert file_says_word(ctx, "grad_fn", "backward")
    ctx.release()
    src = "p.grad.data /= 2\n"
    ctx = Context("g.py", src, ast.parse(src), Imports(), src)
    assert file_says_word(ctx, "grad")
    ctx.release()
