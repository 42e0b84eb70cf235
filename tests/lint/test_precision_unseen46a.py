"""Shapes from the projects of docs/triage/unseen46a.md (session 46), each in another
spelling than the project's and next to a buggy twin that is still reported; the single-file
ones run on real torch, the two-file ones are small projects in tmp_path (run too, imported
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
import importlib.machinery
import importlib.util
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

WRAP = """    class Scaled(nn.Module):
        def __init__(self, layer):
            super().__init__()
            self.layer = layer
        def forward(self, x):
            return F.linear(x, self.layer.weight * 2, self.layer.bias)
    class Wrapper(nn.Module):
        def __init__(self, model):
            super().__init__()
            self.net = []
            for layer in model:
                if isinstance(layer, nn.Linear):
                    self.net.append({made})
                if "Mystery" in type(layer).__name__:
                    self.net.append(Mystery(layer))
            self.net = nn.Sequential(*self.net)
        def forward(self, x):
            return self.net(x)
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(3, 3))
        def forward(self, x):
            wrapped = Wrapper(self.body)
            return wrapped(x)
    m = Model()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    x = torch.randn(2, 3)
    """

ACC = """    def run(name):
        torch.manual_seed(0)
        net = nn.Linear(3, 1)
        opt = getattr(torch.optim, name)(net.parameters(), lr=0.01, {kw})
        k = 2
        for i in range(4):
            x, y = torch.randn(4, 3), torch.randn(4, 1)
            loss = F.mse_loss(net(x), y)
            loss.backward()
            if (i + 1) % k == 0:
                opt.step()
                opt.zero_grad()
        return net.weight.detach()
    def reference(name):
        torch.manual_seed(0)
        net = nn.Linear(3, 1)
        opt = getattr(torch.optim, name)(net.parameters(), lr=0.01, {kw})
        for i in range(4):
            x, y = torch.randn(4, 3), torch.randn(4, 1)
            (F.mse_loss(net(x), y) / 2).backward()
            if i % 2 == 1:
                opt.step()
                opt.zero_grad()
        return net.weight.detach()
    """

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # CoinCheung/Deeplab-Large-FOV: the config module loaded by
    # `importlib.util.module_from_spec(spec)` before the training loop; GT507 read the callee's
    # spelling ("module") as a model whose graph the first backward frees. A function of the
    # standard library runs no forward. Twin: a layer's output computed once before the loop
    # (reported; the second backward raises)
    "standard-library-module-loader-before-the-loop": (Shape("""
    class Pairs(torch.utils.data.Dataset):
        def __init__(self, cfg):
            self.n = cfg.n
        def __len__(self):
            return self.n
        def __getitem__(self, i):
            return torch.randn(3), torch.randn(1)
    class Poly:
        def __init__(self, params, lr):
            self.sgd = torch.optim.SGD(params, lr=lr)
        def zero_grad(self):
            self.sgd.zero_grad()
        def step(self):
            self.sgd.step()
    def train(spec):
        config = importlib.util.module_from_spec(spec)
        config.n, config.dataset, config.lr = 16, "Pairs", 0.1
        net = nn.Linear(3, 1)
        opt = Poly(params=net.parameters(), lr=config.lr)
        loader = torch.utils.data.DataLoader(eval(config.dataset)(config), batch_size=4)
        batches = iter(loader)
        for step in range(6):
            try:
                x, y = next(batches)
            except StopIteration:
                batches = iter(loader)
                x, y = next(batches)
            opt.zero_grad()
            loss = F.mse_loss(net(x), y)
            loss.backward()
            opt.step()
        return loss
    loss = train(importlib.machinery.ModuleSpec("config", None))
    """, "GT507", holds="loss.item() >= 0"),
        Shape("""
    module = nn.Linear(3, 3)
    head = nn.Linear(3, 1)
    opt = torch.optim.SGD(head.parameters(), lr=0.1)
    feats = module(torch.randn(4, 3))
    for step in range(3):
        opt.zero_grad()
        loss = head(feats).pow(2).mean()
        loss.backward()
        opt.step()
    """, "GT507", line=4, raises=(RuntimeError, "second time"))),
    # jwf40/Bayesian-Adaptive-Moment-Estimation-Continual-Learning: Bayesian gradient descent
    # clears, backpropagates and hands each Monte-Carlo sample's gradient to the optimizer
    # (`self.optim.aggregate_grads(n)`), which steps once after the loop with their mean;
    # GT518 said the step applies only the last pass. Twin: nothing gathers the gradient
    # (reported; the step applies the last pass's gradient)
    "gradient-gathered-by-the-optimizer-each-pass": (Shape("""
    class Gathering(torch.optim.SGD):
        def gather(self):
            grads = [p.grad.clone() for g in self.param_groups for p in g["params"]]
            self.sums = grads if not hasattr(self, "sums") else [
                a + b for a, b in zip(self.sums, grads)]
        def step(self):
            for g in self.param_groups:
                for p, total in zip(g["params"], self.sums):
                    p.grad = total / 3
            del self.sums
            super().step()
    net = nn.Linear(2, 1)
    opt = Gathering(net.parameters(), lr=0.1)
    x = torch.randn(4, 2)
    for it in range(2):
        want = 0
        for k in range(3):
            opt.zero_grad()
            loss = net(x + k).sum()
            want = want + torch.autograd.grad(loss, net.weight, retain_graph=True)[0] / 3
            loss.backward()
            opt.gather()
        opt.step()
    """, "GT518", holds="torch.allclose(net.weight.grad, want)"),
        Shape("""
    net = nn.Linear(2, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x = torch.randn(4, 2)
    for it in range(2):
        for k in range(3):
            opt.zero_grad()
            loss = net(x + k).sum()
            want = torch.autograd.grad(loss, net.weight, retain_graph=True)[0]
            loss.backward()
        opt.step()
    """, "GT518", line=10, holds="torch.allclose(net.weight.grad, want)")),
    # HERO-MDH/DASS (Hydra's free adversarial training): `Variable(noise[0:n],
    # requires_grad=True).to(device)` where the global noise buffer was made with
    # `.to(device)` already: the move returns the leaf itself and its `.grad` is filled; GT305
    # said the name holds a non-leaf. Here the same with a dtype (runs on CPU). Twin: the
    # buffer was never moved (reported; `.grad` stays None and reading it raises)
    "leaf-moved-where-its-buffer-already-is": (Shape("""
    kind = torch.float64
    buf = torch.zeros(8, 3).to(kind)
    net = nn.Linear(3, 1).double()
    for i in range(2):
        noise = Variable(buf[0:4], requires_grad=True).to(kind)
        net(torch.randn(4, 3, dtype=kind) + noise).sum().backward()
        buf[0:4] += noise.grad.sign() * 0.1
    """, "GT305", holds="noise.is_leaf and buf.abs().sum() > 0"),
        Shape("""
    kind = torch.float64
    buf = torch.zeros(8, 3)
    net = nn.Linear(3, 1).double()
    for i in range(2):
        noise = Variable(buf[0:4], requires_grad=True).to(kind)
        net(torch.randn(4, 3, dtype=kind) + noise).sum().backward()
        buf[0:4] += noise.grad.sign() * 0.1
    """, "GT305", line=5, raises=(AttributeError, "NoneType"))),
    # HERO-MDH/DASS (symbolic interval analysis): `Interval_network(self.net, c)` built in
    # `forward` wraps each layer of the trained network in a class that keeps the layer and
    # reads its weight, collected in a list turned into `nn.Sequential(*self.net)` (one
    # branch calls a class the project defines nowhere: a dead branch); GT420 said a new
    # layer with random weights. Twin: the wrapper makes a new `nn.Linear` per layer
    # (reported; two calls give different outputs)
    "parameter-free-wrapper-built-in-forward": (Shape(WRAP.format(made="Scaled(layer)"),
                                                      "GT420", holds="torch.equal(m(x), m(x))"),
                                                Shape(WRAP.format(made="nn.Linear(3, 3)"),
                                                      "GT420", line=24,
                                                      holds="not torch.equal(m(x), m(x))")),
    # AI-sangbeom/2D-Human-Pose-Estimation (unseen45b's left shape): the optimizer class is
    # looked up by a config string, `getattr(torch.optim, name)(params, lr=..., alpha=0.99,
    # eps=1e-8)`: only RMSprop takes `alpha` and `eps`, and RMSprop ignores the scale of the
    # undivided sum of micro-batch gradients; GT513 said each step is k times too large. Twin:
    # `momentum=0.9` also fits SGD (reported; with SGD the update differs from the divided one)
    "optimizer-named-by-a-string-and-scale-free": (
        Shape(ACC.format(kw="alpha=0.99, eps=1e-8"), "GT513",
              holds='torch.allclose(run("RMSprop"), reference("RMSprop"), atol=1e-4)'),
        Shape(ACC.format(kw="momentum=0.9"), "GT513", line=9,
              holds='not torch.allclose(run("SGD"), reference("SGD"), atol=1e-4)')),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_silent_look_alike_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text).lstrip("\n"))


def _run(root: Path, module: str, monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.syspath_prepend(str(root))
    for m in [m for m in sys.modules if m in ("features", "evaluate", "builders", "trainer")]:
        del sys.modules[m]
    return importlib.import_module(module)


FEATURES = """
    import torch
    def extract(model, data_loader):
        feats = []
        for x in data_loader:
            out = model(x)
            feats.append(out)
        return torch.cat(feats, 0)
    """
EVALUATE = """
    import torch
    import torch.nn as nn
    import features
    def evaluate(model, data_loader):
        {guard}
            return features.extract(model, data_loader)
    def run():
        return evaluate(nn.Linear(3, 2), [torch.randn(4, 3) for _ in range(3)])
    """


@pytest.mark.parametrize("guard, line", [("with torch.no_grad():", None), ("if True:", 6)])
@pytest.mark.usefixtures("tmp_imports")  # its project's modules gone afterwards
def test_features_gathered_under_no_grad_of_another_file(tmp_path: Path, guard: str,
                                                          line: int | None,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """ArthurZakirov/Multi-Object-Tracking-Competition (and Kristobal-Khunta's copy): the
    re-identification features of every batch are collected by `extract_features` of
    `market/utils.py`, which every caller (`train_reid.py`, `market/eval.py`) runs inside
    `with torch.no_grad():`; GT505 said memory grows with every batch's graph. Twin: the
    caller runs it with grad on (reported; the features hold a graph)."""
    _write(tmp_path, {"features.py": FEATURES, "evaluate.py": EVALUATE.format(guard=guard)})
    found = check_paths([str(tmp_path / "features.py")], Settings()).findings
    assert [(f.line, f.code) for f in found if f.code == "GT505"] == (
        [] if line is None else [(line, "GT505")])
    got = _run(tmp_path, "evaluate", monkeypatch).run()  # type: ignore[attr-defined]
    assert got.requires_grad == (line is not None)
