"""Shapes from the projects of docs/triage/unseen47a.md (session 47), each in another
spelling than the project's and next to a buggy twin that is still reported; the single-file
ones run on real torch, the two-file ones are small projects in tmp_path (run too, imported
from there)."""
from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest

from gradtrace.lint import check_paths, check_source
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
    # cvlab-yonsei/Multi-Task-Learning (LibMTL): `_average_loss` of the loss class averages
    # `self.record`, which `_update_loss` fills with `loss.item()`: a report of Python floats,
    # no tensor goes through NumPy; GT103 said backward on it raises. Twin: the tensor itself
    # is recorded (reported; `np.array` of tensors that require grad raises). The classes of
    # a loss family (a base `compute_loss` overridden by a subclass) as in the project
    "list-of-numbers-on-self-through-numpy": (Shape("""
    class TaskLoss:
        def __init__(self):
            self.values = []
            self.sizes = []
        def compute_loss(self, pred, gt):
            pass
        def update_loss(self, pred, gt):
            loss = self.compute_loss(pred, gt)
            self.values.append(loss.item())
            self.sizes.append(pred.size()[0])
            return loss
        def mean_loss(self):
            values = np.array(self.values)
            sizes = np.array(self.sizes)
            return (values * sizes).sum() / sizes.sum()
    class MSELoss(TaskLoss):
        def __init__(self):
            super().__init__()
            self.loss_fn = nn.MSELoss()
        def compute_loss(self, pred, gt):
            return self.loss_fn(pred, gt)
    net = nn.Linear(3, 1)
    meter = MSELoss()
    for _ in range(2):
        meter.update_loss(net(torch.randn(4, 3)), torch.randn(4, 1)).backward()
    got = meter.mean_loss()
    """, "GT103", holds="got > 0"),
        Shape("""
    class TaskLoss:
        def __init__(self):
            self.values = []
            self.sizes = []
        def compute_loss(self, pred, gt):
            pass
        def update_loss(self, pred, gt):
            loss = self.compute_loss(pred, gt)
            self.values.append(loss)
            self.sizes.append(pred.size()[0])
            return loss
        def mean_loss(self):
            values = np.array(self.values)
            sizes = np.array(self.sizes)
            return (values * sizes).sum() / sizes.sum()
    class MSELoss(TaskLoss):
        def __init__(self):
            super().__init__()
            self.loss_fn = nn.MSELoss()
        def compute_loss(self, pred, gt):
            return self.loss_fn(pred, gt)
    net = nn.Linear(3, 1)
    meter = MSELoss()
    for _ in range(2):
        meter.update_loss(net(torch.randn(4, 3)), torch.randn(4, 1)).backward()
    got = meter.mean_loss()
    """, "GT103", line=13, raises=(RuntimeError, "requires grad"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
@pytest.mark.parametrize("which", [0, 1], ids=["look-alike", "twin"])
def test_shape(name: str, which: int) -> None:
    judge(PRELUDE, SHAPES[name][which])


GATHER = '''
import tempfile
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(3, 3)
        self.fc = nn.Linear(3, 4)
    def forward(self, x, labels):
        feats = self.enc(x)
{gather}
        return F.cross_entropy(self.fc(feats), labels)
'''

LABELS = '''        labels = labels.long()
        bufs = [torch.zeros(labels.size(0)).long() for _ in range(dist.get_world_size())]
        dist.all_gather(bufs, labels)
        labels = torch.cat(bufs)'''

FEATS = '''        bufs = [torch.zeros_like(feats) for _ in range(dist.get_world_size())]
        dist.all_gather(bufs, feats)
        feats = torch.cat(bufs)'''


@pytest.mark.parametrize(("gather", "line"), [(LABELS, None), (FEATS, 16)],
                         ids=["look-alike", "twin"])
def test_integer_labels_gathered(tmp_path: Path, gather: str, line: int | None) -> None:
    """Enot3811/arcface_torch (insightface's partial FC): the labels are gathered into
    buffers made `torch.zeros(n).long()`; all_gather needs the gathered tensor to have their
    dtype, so it is an integer tensor, which never carries a gradient; GT611 said no gradient
    reaches what made them. Twin: the embeddings are gathered and replace the local ones
    (reported; the encoder gets no gradient)."""
    source = GATHER.format(gather=gather)
    found = check_source(source, "head.py", select=["GT611"])
    assert [(f.line, f.code) for f in found] == ([] if line is None else [(line, "GT611")])
    dist = torch.distributed
    env: dict = {}
    exec(compile(source, "head.py", "exec"), env)
    dist.init_process_group("gloo", init_method=(tmp_path / "store").as_uri(), rank=0,
                            world_size=1)
    try:
        head = env["Head"]()
        head(torch.randn(5, 3), torch.tensor([0, 1, 2, 3, 0])).backward()
    finally:
        dist.destroy_process_group()
    assert (head.enc.weight.grad is not None) == (line is None)


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text).lstrip("\n"))


def _run(root: Path, module: str, monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.syspath_prepend(str(root))
    for m in [m for m in sys.modules if m in ("cells", "recurrent", "base47", "linear47")]:
        del sys.modules[m]
    return importlib.import_module(module)


CELLS = """
    import torch
    import torch.nn as nn
    class Cell(nn.Module):
        def __init__(self, n, h, dtype):
            super().__init__()
            self.h, self.dtype = h, dtype
            self.lin = nn.Linear(n + h, h)
        def forward(self, x, h):
            return torch.tanh(self.lin(torch.cat([x, h], 1)))
        def init_hidden(self, batch):
            return nn.Parameter(torch.zeros(batch, self.h)).to(self.dtype)
    """

RECURRENT = """
    import torch
    import torch.nn as nn
    from cells import Cell
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = Cell(3, 4, torch.float64)
{init}
        def forward(self, xs):
{forward}
            for t in range(xs.size(1)):
                h = self.cell(xs[:, t], h)
            return h.sum()
    def run():
        torch.manual_seed(0)
        net = Net().double()
        net(torch.randn(2, 5, 3, dtype=torch.float64)).backward()
        return net
    """


@pytest.mark.parametrize(("init", "forward", "line"), [
    ("", "h = self.cell.init_hidden(xs.size(0))", None),
    ("self.h0 = self.cell.init_hidden(2)", "h = self.h0", 11)], ids=["look-alike", "twin"])
def test_hidden_state_made_in_every_forward(tmp_path: Path, init: str, forward: str,
                                            line: int | None,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """diaoenmao/Speech-Emotion-Recognition-with-Dual-Sequence-LSTM-Architecture (ConvLSTM
    and FT-LSTM cells of many files): `init_hidden` returns `nn.Parameter(torch.zeros(b,
    h)).to(device)`, and every caller, in the models' `forward`, binds it to local names: a
    zero state made anew on every pass, which nothing trains moved or not; GT403 said the
    attribute is not registered. Twin: the model keeps it as `self.h0` in `__init__`, a
    learned initial state (reported; the moved copy is not registered)."""
    _write(tmp_path, {"cells.py": CELLS, "recurrent.py": RECURRENT.format(
        init=" " * 12 + init if init else "", forward=" " * 12 + forward)})
    found = check_paths([str(tmp_path / "cells.py")], Settings()).findings
    assert [(f.line, f.code) for f in found if f.code == "GT403"] == (
        [] if line is None else [(line, "GT403")])
    net = _run(tmp_path, "recurrent", monkeypatch).run()  # type: ignore[attr-defined]
    names = [n for n, _ in net.named_parameters()]
    assert names == ["cell.lin.weight", "cell.lin.bias"]
    assert net.cell.lin.weight.grad is not None
    if line is not None:
        assert not net.h0.is_leaf  # the learned state the twin meant is a non-leaf copy


BASE = """
    import torch.nn as nn
    class Processor:
        def __init__(self, unfreeze):
            self.unfreeze = unfreeze
            self.model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
            self.model[0].requires_grad_(False)
{order}
        def load_model(self):
            pass
        def load_optimizer(self):
            pass
    """

LINEAR = """
    import torch
    from base47 import Processor
    class Linear(Processor):
        def load_model(self):
            if not self.unfreeze:
                for p in self.model[0].parameters():
                    p.requires_grad = False
            else:
                for p in self.model.parameters():
                    p.requires_grad = True
        def load_optimizer(self):
            params = [p for p in self.model.parameters() if p.requires_grad]
            self.optimizer = torch.optim.SGD(params, lr=0.1)
        def train(self, x, y):
            self.optimizer.zero_grad()
            loss = ((self.model(x) - y) ** 2).mean()
            loss.backward()
            self.optimizer.step()
    """


@pytest.mark.parametrize(("order", "line"), [
    ("self.load_model()\nself.load_optimizer()", None),
    ("self.load_optimizer()\nself.load_model()", 9)], ids=["look-alike", "twin"])
def test_unfreeze_run_at_construction_before_the_build(tmp_path: Path, order: str,
                                                       line: int | None,
                                                       monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    """TRungtu041203/Self-Supervised-Hand-Gesture-Recognition (a st-gcn processor): the
    linear-evaluation processor's `load_model` freezes the backbone or, by a flag, unfreezes
    all of it; the base class of another file calls `self.load_model()` in `__init__` before
    `self.load_optimizer()` builds the optimizer from the trainable parameters; GT440 said the
    unfrozen ones are never updated. Twin: the base builds the optimizer first, from the head
    alone (reported; the backbone the flag unfroze keeps its weights)."""
    body = textwrap.indent(order, " " * 12)
    _write(tmp_path, {"base47.py": BASE.format(order=body), "linear47.py": LINEAR})
    found = check_paths([str(tmp_path / "linear47.py")], Settings()).findings
    assert [(f.line, f.code) for f in found if f.code == "GT440"] == (
        [] if line is None else [(line, "GT440")])
    mod = _run(tmp_path, "linear47", monkeypatch)
    p = mod.Linear(unfreeze=True)  # type: ignore[attr-defined]
    before = p.model[0].weight.detach().clone()
    p.train(torch.randn(4, 3), torch.randn(4, 1))
    assert torch.equal(before, p.model[0].weight.detach()) == (line is not None)
