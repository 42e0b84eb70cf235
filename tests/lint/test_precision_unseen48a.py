"""Shapes from the projects of docs/triage/unseen48a.md (session 48), each in another
spelling than the project's and next to a buggy twin that is still reported; the single-file
ones run on real torch, the two-file one is a small project in tmp_path (run too, imported
from there)."""
from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest

from gradtrace.lint import check_paths
from gradtrace.lint.config import Settings
from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import itertools
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
'''

SCRATCH = '''
torch.set_grad_enabled(False)
class Layer:
    def __init__(self, n, m):
        self.w = torch.randn(m, n) * 0.1
        self.dw = torch.zeros_like(self.w)
    def __call__(self, x):
        self.x = x
        return x @ self.w.t()
    def backward(self, grad_out):
        self.dw += grad_out.t() @ self.x
        return grad_out @ self.w
class Stack:
    def __init__(self, *layers):
        self.layers = layers
    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
    def backward(self, grad_out):
        for layer in reversed(self.layers):
            grad_in = layer.backward(grad_out)
            grad_out = grad_in
        return grad_in
class Squared:
    def __call__(self, pred, target):
        self.diff = pred - target
        return (self.diff ** 2).mean()
    def backward(self):
        return 2 * self.diff / self.diff.numel()
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # MihaiDavid05/Exploring-Noise2Noise (Miniproject_2): a from-scratch framework with
    # autograd off for the whole file; `Sequential.backward` chains its modules' own
    # `backward(gradwrtoutput)` and training runs `model.backward(loss.backward())`: no graph
    # is needed; GT203/GT207 said the backward has none. Twin: a torch model trained with
    # autograd's `loss.backward()` under the same global switch (reported; raises).
    "backward-result-used": (Shape(SCRATCH + """
net, crit = Stack(Layer(3, 4), Layer(4, 1)), Squared()
before = net.layers[0].w.clone()
for _ in range(2):
    loss = crit(net(torch.randn(5, 3)), torch.randn(5, 1))
    grad = crit.backward()
    net.backward(grad)
    for layer in net.layers:
        layer.w -= 0.1 * layer.dw
""", "GT203", holds="not torch.equal(before, net.layers[0].w)"),
        Shape("""
torch.set_grad_enabled(False)
net = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 1))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(2):
    loss = F.mse_loss(net(torch.randn(5, 3)), torch.randn(5, 1))
    opt.zero_grad()
    loss.backward()
    opt.step()
""", "GT203", line=1, raises=(RuntimeError, "does not require grad"))),
    # Ka0Ri/Capsule-Network (shortcut-routing): dynamic routing normalises the logits over
    # the parent capsules and sums over the children, then refines the logits from the
    # agreement in a loop: by design; GT764 said the weights of each sum do not add to 1.
    # Twin: attention pooling over the children in a loop of heads whose scores are never
    # refined, normalised over the parents' axis (reported; each sum's weights are off).
    "routing-by-agreement": (Shape("""
def squash(s):
    n2 = (s ** 2).sum(-1, keepdim=True)
    return n2 / (1 + n2) * s / (n2.sqrt() + 1e-8)
def route(u, iters=3):
    b = torch.zeros(*u.shape[:-1], 1)
    for i in range(iters):
        c = F.softmax(b, dim=2)
        v = squash((c * u).sum(dim=1, keepdim=True))
        if i != iters - 1:
            b = b + (u * v).sum(dim=-1, keepdim=True)
    return v, c
v, c = route(torch.randn(2, 6, 4, 8))
""", "GT764", holds="torch.allclose(c.sum(2), torch.ones(2, 6, 1))"),
        Shape("""
def pool(u, scores, heads=2):
    outs = []
    for h in range(heads):
        w = F.softmax(scores, dim=2)
        outs.append((w * u).sum(dim=1, keepdim=True))
    return outs, w
outs, w = pool(torch.randn(2, 6, 4, 8), torch.randn(2, 6, 4, 1))
""", "GT764", line=4, holds="not torch.allclose(w.sum(1), torch.ones(2, 4, 1))")),
    # HamedHemati/Partial-Hypernetworks-for-CL (ResNetLatentReplay): `self.latent_params`,
    # a list of each stage's `parameters()`, read only as `self.latent_params[i]` to freeze
    # the first stages; the optimizer takes `model.parameters()`; GT462 said the head is
    # missing from the groups. Twin: the same list handed whole to the optimizer (reported;
    # the head never changes).
    "list-read-by-index": (Shape("""
class Net(nn.Module):
    def __init__(self, depth):
        super().__init__()
        self.depth = depth
        self.stem = nn.Linear(3, 4)
        self.block = nn.Linear(4, 4)
        self.head = nn.Linear(4, 2)
        self.stages = [{"params": self.stem.parameters()}, {"params": self.block.parameters()}]
    def forward(self, x):
        return self.head(self.block(self.stem(x)))
    def frozen(self):
        return itertools.chain(*[self.stages[i]["params"] for i in range(self.depth)])
net = Net(1)
for p in net.frozen():
    p.requires_grad = False
opt = torch.optim.SGD([p for p in net.parameters() if p.requires_grad], lr=0.1)
before = net.head.weight.clone()
net(torch.randn(5, 3)).pow(2).mean().backward()
opt.step()
""", "GT462", holds="not torch.equal(before, net.head.weight)"),
        Shape("""
class Net(nn.Module):
    def __init__(self, depth):
        super().__init__()
        self.depth = depth
        self.stem = nn.Linear(3, 4)
        self.block = nn.Linear(4, 4)
        self.head = nn.Linear(4, 2)
        self.stages = [{"params": self.stem.parameters()}, {"params": self.block.parameters()}]
    def forward(self, x):
        return self.head(self.block(self.stem(x)))
net = Net(1)
opt = torch.optim.SGD(net.stages, lr=0.1)
before = net.head.weight.clone()
net(torch.randn(5, 3)).pow(2).mean().backward()
opt.step()
""", "GT462", line=8, holds="torch.equal(before, net.head.weight)")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
@pytest.mark.parametrize("which", [0, 1], ids=["look-alike", "twin"])
def test_shape(name: str, which: int) -> None:
    judge(PRELUDE, SHAPES[name][which])


COTEACH = """
    import numpy as np
    import torch
    import torch.nn.functional as F
    def co_losses(y_1, y_2, z_1, t, keep):
        loss_1 = F.cross_entropy(y_1, t, reduction="none")
        ind_1 = torch.from_numpy(np.argsort(loss_1.data.numpy()))
        loss_2 = F.cross_entropy(y_2, t, reduction="none")
        ind_2 = torch.from_numpy(np.argsort(loss_2.data.numpy()))
        n = int(keep * len(ind_1))
        out_1 = F.cross_entropy(y_1[ind_2[:n]], t[ind_2[:n]])
        out_2 = F.cross_entropy({second}, t[ind_1[:n]])
        return out_1, out_2
    """

TRAIN = """
    import torch
    import torch.nn as nn
    from coteach48 import co_losses
    def run():
        torch.manual_seed(0)
        net1 = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 3))
        net2 = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 3))
        opt1 = torch.optim.SGD(net1.parameters(), lr=0.1)
        opt2 = torch.optim.SGD(net2.parameters(), lr=0.1)
        x, t = torch.randn(8, 3), torch.randint(0, 3, (8,))
        logits1 = net1(x)
        logits2 = net2(x)
        peer = net1(x.flip(0))
        loss_1, loss_2 = co_losses(logits1, logits2, peer, t, 0.5)
        opt1.zero_grad()
        loss_1.backward()
        opt1.step()
        opt2.zero_grad()
        loss_2.backward()
        opt2.step()
        return net2
    """


@pytest.mark.parametrize(("second", "line"), [
    ("y_2[ind_1[:n]]", None),
    ("y_2[ind_1[:n]] + z_1[ind_1[:n]]", 17)], ids=["look-alike", "twin"])
@pytest.mark.usefixtures("tmp_imports")  # its project's modules gone afterwards
def test_returned_element_reads_one_network(tmp_path: Path, second: str, line: int | None,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Po1ntu04/Co-teaching-MoreNets (`loss_coteaching` of `loss.py`): the second loss
    reads the second network's logits only (the first network's ranking indexes them), so
    `opt1.step()` before its backward changes nothing it saved; GT609 said it raises. Twin:
    the second loss also reads logits of the first network from a second pass (reported;
    its backward raises after the step)."""
    files = {"coteach48.py": COTEACH.format(second=second), "train48.py": TRAIN}
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text).lstrip("\n"))
    found = check_paths([str(tmp_path / "train48.py")], Settings()).findings
    assert [(f.line, f.code) for f in found if f.code == "GT609"] == (
        [] if line is None else [(line, "GT609")])
    monkeypatch.syspath_prepend(str(tmp_path))
    for m in [m for m in sys.modules if m in ("coteach48", "train48")]:
        del sys.modules[m]
    mod = importlib.import_module("train48")
    if line is None:
        assert mod.run() is not None  # type: ignore[attr-defined]
    else:
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            mod.run()  # type: ignore[attr-defined]
