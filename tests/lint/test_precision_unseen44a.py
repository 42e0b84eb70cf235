"""Shapes from the projects of docs/triage/unseen44a.md (session 44) and the three shapes
unseen43 left, each in another spelling than the project's and next to a buggy twin that is
still reported; the single-file ones run on real torch, the two-file ones are small projects in
tmp_path."""
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

NUMPY_LAYER = """
    class NumpyLinear:
        def __init__(self, w):
            self.w = w
        def forward(self, x):
            self.x = x
            return x @ self.w.T
        def backward(self, grad):
            self.dw = grad.T @ self.x
            return grad @ self.w
    layer = nn.Linear(3, 2)
    x = torch.randn(4, 3)
    out = layer(x)
    """

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # unseen43's left shape: a plain class's own `backward(grad)` (a NumPy re-implementation of
    # a layer checked against torch's) read as autograd's: GT103 said "nothing of
    # `np.ones_like(out)` is left on the graph". Twin: NumPy's array given to `.backward`
    "plain-class-backward-is-its-own": (Shape(NUMPY_LAYER + """
    mine = NumpyLinear(layer.weight.detach().numpy())
    mine_out = mine.forward(x.numpy())
    mine.backward(np.ones_like(mine_out))
    out.sum().backward()
    """, "GT103", holds="np.allclose(mine.dw, layer.weight.grad.numpy())"),
        Shape(NUMPY_LAYER + """
    mine_out = out.detach().numpy()
    mine_out.sum().backward()
    """, "GT103", line=14, raises=(AttributeError, "backward"))),
    # the same left shape through the loop facts: a hand-written loss object built once before
    # the loop, its own `backward()` run on every pass (GT507 read a graph freed twice). Twin:
    # a tensor built once before the loop, backwarded on every pass (raises)
    "plain-loss-object-backward-in-a-loop": (Shape("""
    class SquaredError:
        def forward(self, a, b):
            self.d = a - b
            return (self.d ** 2).mean()
        def backward(self):
            return 2 * self.d / self.d.size
    net = nn.Linear(2, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    crit = SquaredError()
    for i in range(3):
        x, y = torch.randn(8, 2), torch.randn(8, 1)
        opt.zero_grad()
        out = net(x)
        value = crit.forward(out.detach().numpy(), y.numpy())
        g = crit.backward()
        out.backward(torch.from_numpy(g).float())
        opt.step()
    """, "GT507"),
        Shape("""
    net = nn.Linear(2, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x0 = torch.randn(8, 2)
    crit = net(x0).pow(2).mean()
    for i in range(3):
        opt.zero_grad()
        crit.backward()
        opt.step()
    """, "GT507", line=4, raises=(RuntimeError, "backward through the graph a second time"))),
    # zhuangzi926/KnowledgeDistillation-pytorch (adv_train.py): `class Attack(object)` with its
    # own `forward` and `__call__`, the PGD subclass returning detached images, collected in a
    # loop: GT505 took `self.__call__(...)` for a module call. Twin: the model's outputs
    "plain-class-call-is-no-module": (Shape("""
    class Attack(object):
        def __init__(self, model):
            self.model = model
        def forward(self, *inputs):
            raise NotImplementedError
        def __call__(self, *inputs):
            return self.forward(*inputs)
        def collect(self, batches):
            kept = []
            for images, labels in batches:
                adv = self.__call__(images, labels)
                kept.append(adv.cpu())
            return torch.cat(kept)
    class Sign(Attack):
        def forward(self, images, labels):
            images = images.clone().detach().requires_grad_(True)
            cost = F.cross_entropy(self.model(images), labels)
            grad = torch.autograd.grad(cost, images)[0]
            return (images + 0.01 * grad.sign()).detach()
    net = nn.Linear(4, 3)
    batches = [(torch.randn(5, 4), torch.randint(0, 3, (5,))) for _ in range(3)]
    got = Sign(net).collect(batches)
    """, "GT505", holds="got.grad_fn is None"),
        Shape("""
    class Attack(object):
        def __init__(self, model):
            self.model = model
        def collect(self, batches):
            kept = []
            for images, labels in batches:
                out = self.model(images)
                kept.append(out.cpu())
            return torch.cat(kept)
    net = nn.Linear(4, 3)
    batches = [(torch.randn(5, 4), torch.randint(0, 3, (5,))) for _ in range(3)]
    got = Attack(net).collect(batches)
    """, "GT505", line=8, holds="got.grad_fn is not None")),
    # unseen43's left shape: GT516's mode-layer test read the class text for the word `dropout`
    # (a parameter stored and never used, a docstring). Look-alike: Linear and Tanh only;
    # twin: the class builds `nn.Dropout` (trains in eval mode from the second pass on)
    "dropout-named-not-built": (Shape("""
    class Mlp(nn.Module):
        '''Two layers; no Dropout here.'''
        def __init__(self, dropout=0.0):
            super().__init__()
            self.dropout = dropout
            self.net = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))
        def forward(self, x):
            return self.net(x)
    model = Mlp(dropout=0.3)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 2), torch.randn(16, 1)
    model.train()
    for i in range(3):
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
        model.eval()
        test = F.mse_loss(model(x), y).item()
    a = model(x)
    model.train()
    same = torch.equal(a, model(x))
    """, "GT516", holds="same"),
        Shape("""
    class Mlp(nn.Module):
        def __init__(self, dropout=0.0):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Dropout(dropout),
                                     nn.Linear(8, 1))
        def forward(self, x):
            return self.net(x)
    model = Mlp(dropout=0.3)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 2), torch.randn(16, 1)
    model.train()
    for i in range(3):
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
        model.eval()
        test = F.mse_loss(model(x), y).item()
    a = model(x)
    model.train()
    same = torch.equal(a, model(x))
    """, "GT516", line=11, holds="not same")),
    # Sonicfires2/ContinualLearning (representation_drift_replay.py): a helper saves the mode,
    # evaluates, and puts it back (`model.train(was_training)`). Twin: it does not put it back
    "mode-saved-and-put-back": (Shape("""
    def embed(model, x):
        was_training = model.training
        model.eval()
        with torch.no_grad():
            out = model(x)
        model.train(was_training)
        return out
    model = nn.Sequential(nn.Linear(2, 8), nn.Dropout(0.5), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 2), torch.randn(16, 1)
    model.train()
    for i in range(3):
        ref = embed(model, x)
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
    """, "GT516", holds="model.training"),
        Shape("""
    def embed(model, x):
        was_training = model.training
        model.eval()
        with torch.no_grad():
            out = model(x)
        return out
    model = nn.Sequential(nn.Linear(2, 8), nn.Dropout(0.5), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 2), torch.randn(16, 1)
    model.train()
    for i in range(3):
        ref = embed(model, x)
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
    """, "GT516", line=10, holds="not model.training")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_silent_look_alike_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


FROZEN = """
import torch
import torch.nn as nn
import torch.nn.functional as F
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = {part}
        self.head = nn.Linear(4, 1)
    def forward(self, x):
        return self.head(self.backbone(x))
def finetune(loader):
    model = Net()
    model.backbone.eval()
    for p in model.backbone.parameters():
        p.requires_grad = False
    opt = torch.optim.SGD(model.head.parameters(), lr=0.1)
    for epoch in range(3):
        model.train()
        for x, y in loader:
            opt.zero_grad()
            F.mse_loss(model(x), y).backward()
            opt.step()
"""


@pytest.mark.parametrize("part, says, not_says", [
    ("nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.3))", "its Dropout", "BatchNorm"),
    ("nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))", "its BatchNorm", "Dropout"),
    ("nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Dropout(0.3))",
     "its BatchNorm statistics keep updating and its Dropout", None)])
def test_frozen_part_message_says_what_it_holds(part: str, says: str, not_says: str | None
                                                ) -> None:
    """unseen43's left shape: GT443 said "its BatchNorm statistics keep updating" of a frozen
    part that holds only dropout; it names what the part holds."""
    found = check_source(FROZEN.format(part=part), select=["GT443"])
    assert [(f.line, f.code) for f in found] == [(19, "GT443")]
    assert says in found[0].message
    assert not_says is None or not_says not in found[0].message


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text).lstrip("\n"))


BASE = """
    class Trainer(object):
        def __init__(self, net, opt):
            self.net, self.opt = net, opt
        def run_training(self, train_batches, val_batches):
            for epoch in range(2):
                self.net.train()
                for b in train_batches:
                    self.run_iteration(b, True)
                {switch}
                for b in val_batches:
                    self.run_iteration(b, False)
        def run_iteration(self, batch, do_backprop):
            raise NotImplementedError
    """
CHILD = """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from base import Trainer
    class SegTrainer(Trainer):
        def __init__(self):
            net = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 1))
            super().__init__(net, torch.optim.SGD(net.parameters(), lr=0.1))
            self.net = net
        def run_iteration(self, batch, do_backprop):
            x, y = batch
            self.opt.zero_grad()
            loss = F.mse_loss(self.net(x), y)
            if do_backprop:
                loss.backward()
                self.opt.step()
            return loss.item()
    """


@pytest.mark.parametrize("switch, line", [("self.net.eval()", None), ("pass", 13)])
def test_template_caller_in_a_base_of_another_file(tmp_path: Path, switch: str,
                                                   line: int | None) -> None:
    """SarielMa/Increasing-Margin-Adversarial-Training (nnU-Net's trainers): `run_iteration(
    data, do_backprop)` of a trainer subclass runs the network for both phases; the base class
    of another file puts it in eval mode before the validation calls. Twin: the base never
    does."""
    _write(tmp_path, {"base.py": BASE.format(switch=switch), "child.py": CHILD})
    found = check_paths([str(tmp_path / "child.py")], Settings()).findings
    assert [(f.line, f.code) for f in found if f.code == "GT541"] == (
        [] if line is None else [(line, "GT541")])


PER_ROUND = """
import torch
import torch.nn as nn
class Gen(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
    def forward(self, z):
        return self.fc(z)
class Server:
    def __init__(self, model):
        self.model = model
    def fit(self):
        {build}
        opt = torch.optim.Adam(self.gen.parameters(), lr=1e-3)
        for _ in range(10):
            opt.zero_grad()
            self.gen(torch.randn(8, 4)).pow(2).mean().backward()
            opt.step()
    def run(self, rounds):
        self.gen = Gen()
        for r in range(rounds):
            self.fit()
"""


@pytest.mark.parametrize("build, line", [
    ("self.gen = torch.nn.DataParallel(Gen())", None),
    ("self.gen = self.gen.cpu()", 15)])
def test_optimizer_over_a_module_built_in_the_call(build: str, line: int | None) -> None:
    """shaunak27/data-free-continual-learning: `train_generator()` builds new generators, then
    their optimizer, on every call: fresh state is right for a new model. Twin: the same
    generator moved, its optimizer rebuilt on every call."""
    found = check_source(PER_ROUND.format(build=build), select=["GT436"])
    assert [(f.line, f.code) for f in found] == ([] if line is None else [(line, "GT436")])


NESTED = """
import torch.nn as nn
{head}
class Block(nn.Module):
    def __init__(self, c, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU()
        self.downsample = downsample
    def forward(self, x):
        identity = x
        h = self.conv1(x)
        h = self.bn1(h)
        a = self.relu(h)
        if self.downsample is not None:
            identity = self.downsample(identity)
        a += identity
        return a
"""


def test_nested_module_class_does_not_crash_the_inplace_rules() -> None:
    """pengxiang-wang/continual-learning-arena-legacy (cifar_train.py): module classes defined
    inside `main()`; GT602/GT603 looked the class up among the file's top-level classes
    (`KeyError`, GT002). Nested: no internal error; twin at the top level: the in-place add
    into ReLU's saved output is reported."""
    head, _, body = NESTED.format(head="def main():").partition("def main():\n")
    nested = head + "def main():\n" + textwrap.indent(body, "    ") + "    return Block\n"
    found = check_source(nested, select=["GT000", "GT002", "GT602", "GT603"])
    assert [(f.line, f.code) for f in found] == []
    top = check_source(NESTED.format(head=""), select=["GT602", "GT603"])
    assert [(f.line, f.code) for f in top] == [(18, "GT603")]


SELF_NAMED = """
import torch
import torch.nn as nn
import torch.nn.functional as F
def main(x, y):
    model = nn.Linear(4, 3)
    model = nn.Sequential(nn.Identity(), model).to("cpu")
    return F.cross_entropy(model(x){view}, y)
"""


@pytest.mark.parametrize("view, codes", [("", []), (".view(-1, 1)", [(8, "GT763")])])
def test_sequential_naming_itself_is_unknown(view: str, codes: list) -> None:
    """zhuangzi926/KnowledgeDistillation-pytorch (adv_train.py): `model = nn.Sequential(norm,
    model)` read at a later line names itself: the shape reader recursed without end (GT002
    in GT763). Twin: its output viewed as one logit per row, given to cross_entropy."""
    found = check_source(SELF_NAMED.format(view=view), select=["GT002", "GT763"])
    assert [(f.line, f.code) for f in found] == codes


@pytest.mark.parametrize("word, builds", [
    ("dropout", True), ("dropout_rate", True), ("dropout_p", True), ("lora_dropout", False),
    ("p", False), ("drop", False)])
def test_dropout_argument_words(word: str, builds: bool) -> None:
    """The last-resort word for a call's argument that builds a dropout layer (NOTE [mode layers
    built]); `lora_dropout=p`, handed to a base that builds one only when p > 0, is not one."""
    from gradtrace.lint.analysis.vocabulary import DROPOUT_ARG_RE
    assert bool(DROPOUT_ARG_RE.search(word)) is builds
