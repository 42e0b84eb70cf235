"""Shapes from the projects of docs/triage/unseen43.md (session 43), each in another spelling
than the project's and next to a buggy twin that is still reported; the single-file ones run on
real torch, the two-file ones are small projects in tmp_path."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gradtrace.lint import check_paths, check_source
from gradtrace.lint.config import Settings
from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # Pongpisit-Thanasutives/Multi-task-Physics-informed-neural-networks: the "freeze" GT443
    # saw before the loop was `mini = torch.min(d, 0)[0].detach().requires_grad_(False)`, a
    # tensor computed there, next to a test-time `net.eval()`; the net is trained after it.
    # Look-alike: the flag on a computed tensor; twin: the part's parameters frozen
    "flag-on-a-computed-tensor-is-no-freeze": (Shape("""
        class Pair(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(2, 4), nn.BatchNorm1d(4), nn.Linear(4, 1))
                self.head = nn.Linear(1, 1)
            def forward(self, x):
                return self.head(self.net(x))
        model = Pair()
        x, y = torch.randn(16, 2), torch.randn(16, 1)
        model.net.eval()
        lo = torch.min(model.net(x), 0)[0].detach().requires_grad_(False)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        before = model.net[0].weight.clone()
        for i in range(3):
            model.train()
            opt.zero_grad()
            F.mse_loss(model(x) - lo, y).backward()
            opt.step()
        """, "GT443", holds="not torch.equal(before, model.net[0].weight)"),
        Shape("""
        class Pair(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(2, 4), nn.BatchNorm1d(4), nn.Linear(4, 1))
                self.head = nn.Linear(1, 1)
            def forward(self, x):
                return self.head(self.net(x))
        model = Pair()
        x, y = torch.randn(16, 2), torch.randn(16, 1)
        model.net.eval()
        model.net.requires_grad_(False)
        opt = torch.optim.SGD(model.head.parameters(), lr=0.1)
        stats = model.net[1].running_mean.clone()
        for i in range(3):
            model.train()
            opt.zero_grad()
            F.mse_loss(model(x), y).backward()
            opt.step()
        """, "GT443", line=15, holds="not torch.equal(stats, model.net[1].running_mean)")),
    # the same notebooks: `with torch.no_grad(): loss = closure()` where the closure runs
    # `if loss.requires_grad: loss.backward()` (an LBFGS closure used again to report the
    # loss). Look-alike: the guarded backward; twin: the backward unguarded (raises)
    "backward-guarded-by-requires-grad": (Shape("""
        net = nn.Linear(3, 1)
        x, y = torch.randn(8, 3), torch.randn(8, 1)
        opt = torch.optim.LBFGS(net.parameters(), max_iter=3)
        def closure():
            if torch.is_grad_enabled():
                opt.zero_grad()
            loss = F.mse_loss(net(x), y)
            if loss.requires_grad:
                loss.backward()
            return loss
        opt.step(closure)
        with torch.no_grad():
            shown = closure()
        """, "GT210", holds="not shown.requires_grad"),
        Shape("""
        net = nn.Linear(3, 1)
        x, y = torch.randn(8, 3), torch.randn(8, 1)
        opt = torch.optim.LBFGS(net.parameters(), max_iter=3)
        def closure():
            opt.zero_grad()
            loss = F.mse_loss(net(x), y)
            loss.backward()
            return loss
        opt.step(closure)
        with torch.no_grad():
            shown = closure()
        """, "GT210", line=10, raises=(RuntimeError, "does not require grad"))),
    # taldatech/soft-intro-vae-pytorch: sample images read under `torch.no_grad()` into
    # `torch.tensor(np.asarray(im, dtype=np.float32), requires_grad=True) / 127.5 - 1.` for
    # display: no gradient is meant there. Twin: the same leaf made with grad on from a
    # model's output, then an operand of the loss (the model gets no gradient through it)
    "fresh-leaf-made-under-no-grad": (Shape("""
        net = nn.Linear(4, 4)
        images = [np.ones(4) * k for k in range(3)]
        with torch.no_grad():
            shown = [torch.tensor(np.asarray(im, dtype=np.float32), requires_grad=True) / 2 - 1.
                     for im in images]
            sample = torch.stack(shown)
        loss = net(sample).pow(2).mean()
        loss.backward()
        """, "GT119", holds="net.weight.grad is not None"),
        Shape("""
        net = nn.Linear(4, 4)
        x = torch.randn(3, 4)
        out = net(x)
        loss = torch.tensor(out.detach().pow(2).mean(), requires_grad=True) * 2 - 1.
        loss.backward()
        """, "GT119", line=4, holds="net.weight.grad is None")),
    # Pongpisit-...: a notebook cell ends in `torch.abs(ae.l1_strength)` (after
    # `complex_mse(recon, X)`): it shows the value, nothing reads `ae` again. Twin: the same
    # op on a parameter the next lines train with (the update is lost)
    "top-level-op-on-an-attribute-shown": (Shape("""
        class AE(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Linear(2, 2)
                self.strength = nn.Parameter(torch.tensor([-0.5]))
        ae = AE()
        torch.abs(ae.strength)
        """, "GT708", holds="ae.strength.item() == -0.5"),
        Shape("""
        class AE(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Linear(2, 2)
                self.strength = nn.Parameter(torch.tensor([-0.5]))
        ae = AE()
        with torch.no_grad():
            torch.abs(ae.strength)
        penalty = ae.strength * ae.enc.weight.abs().sum()
        """, "GT708", line=8, holds="penalty.item() < 0")),
    # zk2275/IDL-HW4 (tests): a NumPy re-implementation of a layer is checked against torch's:
    # `out = mine.forward(X.detach().numpy())`, then `mine.backward(np.ones_like(out))`.
    # Twin: `np.ones_like` of the torch layer's output backwarded (raises "requires grad"; it
    # was given to `mine.backward`, read as autograd's until unseen44a: NOTE [manual backward])
    "numpy-layer-output-read-by-numpy": (Shape("""
        class MyLinear:
            def init_weights(self, w):
                self.w = w
            def forward(self, a):
                self.a = a
                return a @ self.w.T
            def backward(self, d):
                return d @ self.w
        ref = nn.Linear(3, 2)
        mine = MyLinear()
        mine.init_weights(ref.weight.detach().numpy())
        X = torch.randn(4, 3, requires_grad=True)
        out = mine.forward(X.detach().numpy())
        ref(X).sum().backward()
        dX = mine.backward(np.ones_like(out))
        """, "GT103", holds="np.allclose(dX, X.grad.numpy(), atol=1e-5)"),
        Shape("""
        class MyLinear:
            def init_weights(self, w):
                self.w = w
            def backward(self, d):
                return d @ self.w
        ref = nn.Linear(3, 2)
        mine = MyLinear()
        mine.init_weights(ref.weight.detach().numpy())
        X = torch.randn(4, 3, requires_grad=True)
        out = ref(X)
        np.ones_like(out).sum().backward()
        """, "GT103", line=11, raises=(RuntimeError, "requires grad"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_silent_look_alike_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


# anugrahchemparathy/ContrastiveLearning (barlowtwins/main.py): `loss = model.forward(y1, y2)`
# on the DDP wrapper (its forward arms the reducer) and `model.module.forward_rotation(r)` in
# the same loss: one backward, every gradient all-reduced. Twin: only the inner module runs.
DDP_STEP = """
import torch
from torch.nn.parallel import DistributedDataParallel as DDP
def main(net, loader, opt):
    model = DDP(net)
    for y1, y2, r, t in loader:
        opt.zero_grad()
        loss = {first}
        logits = model.module.forward_rotation(r)
        loss = loss + torch.nn.functional.cross_entropy(logits, t)
        loss.backward()
        opt.step()
"""


def test_ddp_forward_called_by_name_arms_the_reducer() -> None:
    found = check_source(DDP_STEP.format(first="model.forward(y1, y2)"), select=["GT453"])
    assert found == []


def test_inner_module_alone_bypasses_ddp() -> None:
    found = check_source(DDP_STEP.format(first="model.module(y1, y2)"), select=["GT453"])
    assert [(f.line, f.code) for f in found] == [(8, "GT453"), (9, "GT453")]


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text).lstrip("\n"))


MLP = """
    import torch.nn as nn
    class TorchMLP(nn.Module):
        def __init__(self, dims, dropout=None):
            super().__init__()
            layers = []
            for a, b in zip(dims, dims[1:]):
                layers += [nn.Linear(a, b), nn.Tanh()]
                if dropout is not None:
                    layers.append(dropout)
            self.model = nn.Sequential(*layers[:-1])
        def forward(self, x):
            return self.model(x)
    """
FIT = """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from mlp import TorchMLP
    torch.manual_seed(0)
    net = TorchMLP([2, 16, 1], dropout={drop})
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    x, y = torch.randn(32, 2), torch.randn(32, 1)
    net.train()
    for i in range(4):
        opt.zero_grad()
        F.mse_loss(net(x), y).backward()
        opt.step()
        net.eval()
        test = F.mse_loss(net(x).detach(), y).item()
    """


@pytest.mark.parametrize("drop, line", [("None", None), ("nn.Dropout(0.5)", 9)])
def test_dropout_none_keyword_builds_no_layer(tmp_path: Path, drop: str, line: int | None
                                              ) -> None:
    """Pongpisit-...: `TorchMLP(dims, bn=None, dropout=None)` of another file, evaluated in the
    loop: eval() changes nothing (GT516 read `dropout=None` as a layer); with a Dropout it
    trains in eval mode from the second pass on."""
    _write(tmp_path, {"mlp.py": MLP, "fit.py": FIT.format(drop=drop)})
    found = check_paths([str(tmp_path / "fit.py")], Settings()).findings
    assert [(f.line, f.code) for f in found if f.code == "GT516"] == (
        [] if line is None else [(line, "GT516")])


EMA = """
    import torch
    import torch.nn as nn
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)
        {lerp}
    """
EMA_LERP = """def lerp(self, other, beta):
            with torch.no_grad():
                for p, q in zip(self.parameters(), other.parameters()):
                    p.lerp_(q, 1.0 - beta)"""
STEP = """
    import torch
    from net import Net
    torch.manual_seed(0)
    model = Net()
    model_s = Net()
    with torch.no_grad():
        model.fc.weight.add_(1.0)
    for i in range(2):
        model_s.{call}
    """


@pytest.mark.parametrize("lerp, call, line", [
    (EMA_LERP, "lerp(model, 0.5)", None),
    ("", "fc.weight.lerp(model.fc.weight, 0.5)", 9)])
def test_project_method_named_like_a_tensor_op(tmp_path: Path, lerp: str, call: str,
                                               line: int | None) -> None:
    """taldatech/soft-intro-vae-pytorch: `model_s.lerp(model, beta)`, a method of the project's
    model class that moves the EMA copy in place; twin: Tensor.lerp on a weight, thrown away."""
    _write(tmp_path, {"net.py": EMA.format(lerp=lerp), "step.py": STEP.format(call=call)})
    found = check_paths([str(tmp_path / "step.py")], Settings()).findings
    assert [(f.line, f.code) for f in found if f.code == "GT708"] == (
        [] if line is None else [(line, "GT708")])
