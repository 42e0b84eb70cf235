"""Evidence instead of names (session 33, NOTE [loss evidence]): a function named like a loss
is one only when a call of it reaches a backward (in its file or in a project file importing
it) or is handed a graph; a parameter named like a target is data only when no call hands it
a model output. Each look-alike is silent and runs; each buggy twin is reported and fails on
real torch."""
from __future__ import annotations

import runpy
import sys
import textwrap
from pathlib import Path

import pytest

from gradtrace.lint import check_paths
from gradtrace.lint.config import Settings
from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # RAVE's `loss_wc`, UniAudio's `calculate_ms_stft_loss`, KGAT's `logloss`: an objective a
    # search minimises over numbers, in a file that also trains a model. Its argument is a
    # plain number at every call: nothing backpropagates its result, nothing hands it a graph.
    # Twin: the same function's value backpropagated: the copy leaves no path (element 0)
    "loss-named-objective-of-a-number-search": (Shape("""
        def window_loss(cutoff):
            taps = torch.tensor(np.hanning(8) * cutoff)
            return (taps - 1.0).abs().max()
        best = min(np.linspace(0.1, 0.9, 9), key=lambda c: float(window_loss(c)))
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), 0.1)
        loss = model(torch.randn(8, 4)).pow(2).mean()
        loss.backward()
        opt.step()
        """, "GT104", holds="model.weight.grad is not None"), Shape("""
        def window_loss(cutoff):
            taps = torch.tensor(np.hanning(8) * cutoff)
            return (taps - 1.0).abs().max()
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), 0.1)
        loss = window_loss(model(torch.randn(8, 4)).sum().item())
        loss.backward()
        opt.step()
        """, "GT104", line=2, raises=(RuntimeError, "does not require grad"))),
    # PVD's `kl_loss(x, y)`, PINNacle's `bd_loss(x, y)`: a mean-teacher consistency loss whose
    # second parameter is spelled `target` but is handed the student's output at the call;
    # the teacher's side is detached on purpose. Twin: the call hands the labels as the
    # target and the student's output as the detached side: nothing is left on the graph
    "target-named-parameter-given-the-student-output": (Shape("""
        def consistency_loss(pred, target):
            return ((pred.detach() - target) ** 2).mean()
        student, teacher = nn.Linear(4, 2), nn.Linear(4, 2)
        opt = torch.optim.SGD(student.parameters(), 0.1)
        x = torch.randn(8, 4)
        loss = consistency_loss(teacher(x), student(x))
        loss.backward()
        opt.step()
        """, "GT107", holds="student.weight.grad is not None"), Shape("""
        def consistency_loss(pred, target):
            return ((pred.detach() - target) ** 2).mean()
        student = nn.Linear(4, 2)
        opt = torch.optim.SGD(student.parameters(), 0.1)
        x, labels = torch.randn(8, 4), torch.randn(8, 2)
        loss = consistency_loss(student(x), labels)
        loss.backward()
        opt.step()
        """, "GT107", line=2, raises=(RuntimeError, "does not require grad"))),
    # a loss-named method the file calls only on numbers (a report of a schedule's cost), in
    # a trainer whose real loss is another. Twin: the method's value is the trained loss
    "loss-named-method-called-on-numbers-only": (Shape("""
        class Trainer:
            def __init__(self):
                self.model = nn.Linear(4, 1)
                self.opt = torch.optim.SGD(self.model.parameters(), 0.1)
            def schedule_loss(self, lrs):
                return torch.tensor(lrs).diff().abs().sum()
            def fit(self, x):
                loss = self.model(x).pow(2).mean()
                loss.backward()
                self.opt.step()
                return float(self.schedule_loss([0.1, 0.05, 0.01]))
        t = Trainer()
        t.fit(torch.randn(8, 4))
        """, "GT104", holds="t.model.weight.grad is not None"), Shape("""
        class Trainer:
            def __init__(self):
                self.model = nn.Linear(4, 1)
                self.opt = torch.optim.SGD(self.model.parameters(), 0.1)
            def schedule_loss(self, lrs):
                return torch.tensor(lrs).diff().abs().sum()
            def fit(self, x):
                loss = self.schedule_loss(self.model(x).flatten().tolist())
                loss.backward()
                self.opt.step()
        t = Trainer()
        t.fit(torch.randn(8, 4))
        """, "GT104", line=6, raises=(RuntimeError, "does not require grad"))),
    # KGAT's `logloss`: a local of the same spelling inside the function is no use of the
    # function as a value; its only call hands it NumPy data. Twin: the call hands it the
    # model's output as a list, and its value is backpropagated
    "loss-named-function-shadowed-by-its-own-local": (Shape("""
        def smooth_loss(seq):
            smooth_loss = (seq[1:] - seq[:-1]).abs().detach().mean()
            return smooth_loss
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), 0.1)
        loss = model(torch.randn(8, 4)).pow(2).mean()
        loss.backward()
        opt.step()
        report = float(smooth_loss(torch.from_numpy(np.array([0.3, 0.1, 0.4]))))
        """, "GT107", holds="model.weight.grad is not None"), Shape("""
        def smooth_loss(seq):
            smooth_loss = (seq[1:] - seq[:-1]).abs().detach().mean()
            return smooth_loss
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), 0.1)
        loss = smooth_loss(model(torch.randn(8, 4)).flatten())
        loss.backward()
        opt.step()
        """, "GT107", line=2, raises=(RuntimeError, "does not require grad"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


# across files: a loss function of `losses.py`, with no call in its own file
LOSSES = """
    import torch


    def spectral_loss(a, b):
        d = torch.fft.rfft(a - b, dim=-1).abs().detach()
        return d.pow(2).mean()
"""
TRAIN_ON_IT = """
    import torch
    import torch.nn as nn

    from losses import spectral_loss

    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), 0.1)
    x, y = torch.randn(8, 4), torch.randn(8, 2)
    loss = spectral_loss(model(x), y)
    loss.backward()
    opt.step()
"""
TRAIN_ELSE = """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), 0.1)
    x, y = torch.randn(8, 4), torch.randn(8, 2)
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
"""
REPORT = """
    import torch

    from losses import spectral_loss

    est, ref = torch.ones(3), torch.zeros(3)
    distance = float(spectral_loss(est, ref))
"""


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


def _found(root: Path) -> list[tuple[str, int, str]]:
    got = check_paths([str(root)], Settings(select=("GT1",))).findings
    return sorted((Path(f.path).name, f.line, f.code) for f in got)


def _run(root: Path, script: str) -> dict:
    sys.path.insert(0, str(root))
    try:
        return runpy.run_path(str(root / script), run_name="__main__")
    finally:
        sys.path.remove(str(root))
        sys.modules.pop("losses", None)


def test_loss_function_only_a_report_of_another_file_calls_is_silent(tmp_path):
    root = _write(tmp_path, {"losses.py": LOSSES, "train.py": TRAIN_ELSE, "report.py": REPORT})
    assert _found(root) == []
    assert _run(root, "train.py")["model"].weight.grad is not None
    assert _run(root, "report.py")["distance"] > 0


def test_loss_function_another_file_backpropagates_is_reported(tmp_path):
    root = _write(tmp_path, {"losses.py": LOSSES, "train.py": TRAIN_ON_IT})
    assert ("losses.py", 5, "GT107") in _found(root)
    with pytest.raises(RuntimeError, match="does not require grad"):
        _run(root, "train.py")


def test_lone_loss_function_of_a_one_file_project_keeps_its_name(tmp_path):
    """No code fact at all (nothing calls it, no other file): the name is the last resort."""
    root = _write(tmp_path, {"losses.py": LOSSES})
    assert _found(root) == [("losses.py", 5, "GT107")]
