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


# -- GT753: NOTE [layer-free forward] --------------------------------------------------------
# ReAgent's TSP reward model: a module with no layer whose forward hands its argument to a
# tour-length helper (`sqrt` of squared steps); the file only scripts and saves it (a reward,
# computed on ranked data). No instance is trained here: the helper's input is not known to
# carry a graph. The twin calls it on a network's output before `backward()`.

_REWARD_MODEL = '''
import torch
from torch import nn


class TourRewardModel(nn.Module):
    def forward(self, ranked):
        return -tour_length(ranked)


def tour_length(ranked):
    shifted = torch.roll(ranked, shifts=1, dims=1)
    return torch.sqrt(((shifted - ranked) ** 2).sum(-1)).sum(-1)


def export(path):
    torch.jit.save(torch.jit.script(TourRewardModel()), path)
'''

_REWARD_TRAINED = _REWARD_MODEL + '''

def train(net, opt, x):
    reward = TourRewardModel()
    reward(net(x)).mean().backward()
    opt.step()
'''


def test_layer_free_module_only_exported_is_silent(tmp_path):
    assert _found(tmp_path, _REWARD_MODEL, "GT753") == []


def test_layer_free_module_trained_is_reported(tmp_path):
    assert _found(tmp_path, _REWARD_TRAINED, "GT753") == [("GT753", 12)]


def test_layer_free_twin_gives_nan(tmp_path):
    """The twin's claim on torch: two equal consecutive points give a NaN gradient."""
    import torch
    ranked = torch.tensor([[[0.0, 0.0], [0.0, 0.0], [1.0, 1.0]]], requires_grad=True)
    shifted = torch.roll(ranked, shifts=1, dims=1)
    torch.sqrt(((shifted - ranked) ** 2).sum(-1)).sum(-1).mean().backward()
    assert torch.isnan(ranked.grad).any()


def test_layer_free_public_module_is_reported(tmp_path):
    """kornia's AEPE: a layer-free module made nowhere in its file is a public module for
    callers out of sight (it may be a loss): still reported."""
    text = _REWARD_MODEL.replace("torch.jit.script(TourRewardModel())", "None")
    assert _found(tmp_path, text, "GT753") == [("GT753", 12)]
