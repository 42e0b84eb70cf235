"""Shapes from the projects of docs/triage/unseen40.md (session 40), each in another spelling
than the project's and next to a buggy twin that is still reported; each runs on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # PRCinguhou/domain-adaptation (`train.py`, M3SDA): a retained backward, the step, then a
    # loss summed over a `for index, batch in enumerate(...)` loop after the step. GT601 looked
    # for the graph's values among the bindings the later loss reads, the loop's targets
    # among them: a target has no value and the rule crashed (GT002). Look-alike: the target
    # features are computed again after the step; twin: they are not, the kept graph is read
    "loss-summed-over-a-loop-after-the-step": (Shape("""
        extractor = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 4))
        clf = nn.Linear(4, 2)
        opt = torch.optim.SGD(list(extractor.parameters()) + list(clf.parameters()), lr=0.1)
        src = [torch.randn(2, 3) for _ in range(2)]
        tar = torch.randn(2, 3)
        for epoch in range(2):
            tar_feature = extractor(tar)
            loss = clf(tar_feature).sum()
            opt.zero_grad()
            loss.backward(retain_graph=True)
            opt.step()
            opt.zero_grad()
            tar_feature = extractor(tar)
            loss = 0
            for index, batch in enumerate(src):
                loss += clf(extractor(batch)).sum() - clf(tar_feature).mean()
            loss.backward()
            opt.step()
        """, "GT601"), Shape("""
        extractor = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 4))
        clf = nn.Linear(4, 2)
        opt = torch.optim.SGD(list(extractor.parameters()) + list(clf.parameters()), lr=0.1)
        src = [torch.randn(2, 3) for _ in range(2)]
        tar = torch.randn(2, 3)
        for epoch in range(2):
            tar_feature = extractor(tar)
            loss = clf(tar_feature).sum()
            opt.zero_grad()
            loss.backward(retain_graph=True)
            opt.step()
            opt.zero_grad()
            loss = 0
            for index, batch in enumerate(src):
                loss += clf(extractor(batch)).sum() - clf(tar_feature).mean()
            loss.backward()
            opt.step()
        """, "GT601", line=15, raises=(RuntimeError, "modified by an inplace operation"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_silent_look_alike_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


def test_no_internal_error_on_a_loop_target_after_the_step() -> None:
    """The look-alike above crashed GT601 (GT002) before its fix: the whole file, every rule."""
    import textwrap

    from gradtrace.lint import check_source
    look_alike = SHAPES["loss-summed-over-a-loop-after-the-step"][0]
    source = PRELUDE + textwrap.dedent(look_alike.src).lstrip("\n")
    assert [f.code for f in check_source(source, "shape.py") if f.code == "GT002"] == []


# koukyo1994/kaggle-rfcx (`team_scripts/*.py`, twenty Kaggle scripts): `def f1_loss(y_true,
# y_pred)` thresholds `y_pred > 0.5` and returns the F1 score; its one call is an epoch meter's
# `f1_loss(np.array(self.y_true), np.array(self.y_pred))` in a property returning a dict: a metric
# on NumPy arrays, no graph to cut (NOTE [numpy-fed calls]; the value's way through the
# property is not followed, so the loss evidence was unknown and the name decided). Twins: the same function given the model's output and
# backpropagated, in the file itself or from another file of the project
F1 = '''
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def f1_loss(y_true, y_pred, epsilon=1e-7):
    y_pred = 1.0 * (y_pred > 0.5)
    tp = (y_true * y_pred).sum()
    fp = ((1 - y_true) * y_pred).sum()
    fn = (y_true * (1 - y_pred)).sum()
    precision = tp / (tp + fp + epsilon)
    recall = tp / (tp + fn + epsilon)
    return 2 * (precision * recall) / (precision + recall + epsilon)


class Meter:
    def __init__(self):
        self.y_true, self.y_pred = [], []

    def update(self, y, p):
        self.y_true.extend(y.tolist())
        self.y_pred.extend(p.tolist())

    @property
    def avg(self):
        self.f1score = SCORE
        return {"f1score": self.f1score}


model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
meter = Meter()
for step in range(3):
    x, y = torch.randn(8, 4), torch.randint(0, 2, (8, 1)).float()
    out = model(x)
    loss = F.binary_cross_entropy_with_logits(out, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    meter.update(y.flatten(), torch.sigmoid(out).detach().flatten())
TAIL
'''
F1_METRIC = "f1_loss(np.array(self.y_true), np.array(self.y_pred))"


def test_f1_metric_of_numpy_arrays_is_silent(tmp_path) -> None:
    import runpy
    path = tmp_path / "exp076.py"
    path.write_text(F1.replace("SCORE", F1_METRIC).replace("TAIL", "print(meter.avg)"))
    (tmp_path / "exp078.py").write_text("def f1_loss(a, b):\n    return a\n")  # a sibling
    assert _codes(path, "GT108") == []
    runpy.run_path(str(path))


def test_f1_of_the_model_output_backpropagated_is_reported(tmp_path) -> None:
    import runpy
    path = tmp_path / "exp076.py"
    path.write_text(F1.replace("SCORE", F1_METRIC).replace(
        "TAIL", "f1_loss(y, torch.sigmoid(model(x))).backward()"))
    assert _codes(path, "GT108") == [9]
    with pytest.raises(RuntimeError, match="does not require grad"):
        runpy.run_path(str(path))


def test_f1_backpropagated_from_another_file_is_reported(tmp_path) -> None:
    import runpy
    path = tmp_path / "metrics.py"
    path.write_text(F1.replace("SCORE", F1_METRIC).replace("TAIL", ""))
    user = tmp_path / "train.py"
    user.write_text("import sys\nsys.path.insert(0, %r)\n" % str(tmp_path)
                    + "import torch\nfrom metrics import f1_loss, model\n"
                    "x, y = torch.randn(8, 4), torch.ones(8, 1)\n"
                    "f1_loss(y, torch.sigmoid(model(x))).backward()\n")
    assert _codes(path, "GT108") == [9]
    with pytest.raises(RuntimeError, match="does not require grad"):
        runpy.run_path(str(user))


def _codes(path, code: str) -> list[int]:  # type: ignore[no-untyped-def]
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    return [f.line for f in check_paths([str(path)], Settings()).findings if f.code == code]


# wassname/world-models-sonic-pytorch (`models/rnn.py`): `from ..config import eps` then, in the
# MDN-RNN's loss method, `loss -= np.log(eps)` with `eps = 1e-8` in the package's `config.py`:
# NumPy is handed a Python number (NOTE [module constants], `toplevel.imported_number`). Twin:
# the package's constant is a tensor that requires grad: NumPy reads it through `.numpy()`
MDN = '''
import numpy as np
import torch
from .config import EPS


class MDN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 4)

    def rnn_loss(self, x, y):
        loss = -torch.logsumexp(self.fc(x) + y, dim=1)
        loss = loss.mean()
        loss -= np.log(EPS)
        return loss
'''


def _mdn_package(tmp_path, config: str):  # type: ignore[no-untyped-def]
    pkg = tmp_path / "wm"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "config.py").write_text(config)
    (pkg / "rnn.py").write_text(MDN.lstrip("\n"))
    return pkg / "rnn.py"


def _run_mdn(tmp_path):  # type: ignore[no-untyped-def]
    import importlib
    import sys
    sys.path.insert(0, str(tmp_path))
    try:
        mdn = importlib.import_module("wm.rnn").MDN()
        mdn.rnn_loss(torch.randn(2, 3), torch.randn(2, 4)).backward()
    finally:
        sys.path.remove(str(tmp_path))
        for m in ("wm.rnn", "wm.config", "wm"):
            sys.modules.pop(m, None)


def test_number_of_the_package_through_numpy_is_silent(tmp_path) -> None:
    path = _mdn_package(tmp_path, "EPS = 1e-8\n")
    assert _codes(path, "GT103") == []
    _run_mdn(tmp_path)


def test_tensor_of_the_package_through_numpy_is_reported(tmp_path) -> None:
    path = _mdn_package(tmp_path, "import torch\nEPS = torch.full((), 1e-8, requires_grad=True)\n")
    assert _codes(path, "GT103") == [14]
    with pytest.raises(RuntimeError, match="requires grad"):
        _run_mdn(tmp_path)
