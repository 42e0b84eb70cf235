"""Session 40 (prec40b): a false alarm of unseen code closed by the fact it lacked
(docs/triage/prec40b.md). The look-alike is the false-alarm shape (silent); each buggy twin is
the same code with the evidence present (reported at the binding that made the non-leaf).
The snippets move tensors with `.cuda()`, so they are checked, not run (CPU-only CI)."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest


def _found(root: Path, text: str, code: str) -> list[tuple[str, int]]:
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    p = root / "case.py"
    p.write_text(textwrap.dedent(text).lstrip("\n"))
    got = check_paths([str(p)], Settings()).findings
    return sorted((f.code, f.line) for f in got if f.code == code)


# -- GT307: NOTE [device of a wrapped argument] -------------------------------------------
# informative-outlier-mining's Mahalanobis score: `Variable(inputs, requires_grad=True)` then
# `.cuda()`, where `inputs` is an argument every caller (other files) hands on the GPU:
# `.cuda()` returns the leaf itself, and `data.grad` is filled.

_WRAPPED_ARGUMENT = '''
import torch
from torch.autograd import Variable


def input_gradient_sign(inputs, model):
    data = Variable(inputs, requires_grad=True)
    data = data.cuda()
    loss = model(data).sum()
    loss.backward()
    return torch.ge(data.grad, 0)
'''

# twin: the tensor is made here (from NumPy: on the CPU), so `.cuda()` copies
_MADE_HERE = '''
import numpy as np
import torch
from torch.autograd import Variable


def input_gradient_sign(batch, model):
    inputs = torch.from_numpy(np.asarray(batch, dtype=np.float32))
    data = Variable(inputs, requires_grad=True)
    data = data.cuda()
    loss = model(data).sum()
    loss.backward()
    return torch.ge(data.grad, 0)
'''

# twin: a caller in sight hands a CPU tensor
_CPU_CALLER = _WRAPPED_ARGUMENT + '''

def main(model):
    return input_gradient_sign(torch.rand(4, 3), model)
'''

# twin: a cast, not a move: `.to(torch.float64)` copies wherever the tensor is
_CAST = _WRAPPED_ARGUMENT.replace("data.cuda()", "data.to(torch.float64)")


def test_wrapped_argument_moved_is_silent(tmp_path):
    assert _found(tmp_path, _WRAPPED_ARGUMENT, "GT307") == []


@pytest.mark.parametrize("text,line", [(_MADE_HERE, 9), (_CPU_CALLER, 7), (_CAST, 7)],
                         ids=["made-here", "cpu-caller", "cast"])
def test_wrapped_tensor_moved_is_reported(tmp_path, text, line):
    assert _found(tmp_path, text, "GT307") == [("GT307", line)]
