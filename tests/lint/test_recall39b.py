"""Session 39, helper recall39b: facts that name the root line of real-world misses in other
words than the cases. Each pair: a look-alike that is silent (and trains as meant on real
torch) and a buggy twin reported on its line (and shown wrong on real torch)."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

# NOTE [optimizer owners across methods] / NOTE [loss modules] (GT559): a center loss given by
# the builder, the optimizer made by a module-level helper in another method
CENTER_TWIN = '''
import torch
from torch import nn


def make_optimizer(net, lr):
    return torch.optim.SGD(net.parameters(), lr=lr)


class CenterLoss(nn.Module):
    def __init__(self, classes, dim):
        super().__init__()
        self.centers = nn.Parameter(torch.randn(classes, dim))

    def forward(self, feats, labels):
        return (feats - self.centers[labels]).pow(2).sum(1).mean()


class Fitter:
    def __init__(self, net, aux):
        self.net = net
        self.aux = aux

    def prepare(self):
        self.opt = make_optimizer(self.net, 0.1)

    def run(self, batches):
        self.prepare()
        for x, y in batches:
            total = self.aux(self.net(x), y)
            self.opt.zero_grad()
            total.backward()
            self.opt.step()


torch.manual_seed(0)
fitter = Fitter(nn.Linear(4, 3), CenterLoss(2, 3))
before = fitter.aux.centers.detach().clone()
fitter.run([(torch.randn(8, 4), torch.randint(0, 2, (8,))) for _ in range(3)])
MOVED = (fitter.aux.centers - before).abs().max().item()
'''
CENTER_LOOKALIKE = CENTER_TWIN.replace(
    "return torch.optim.SGD(net.parameters(), lr=lr)",
    "return torch.optim.SGD(net, lr=lr)").replace(
    "self.opt = make_optimizer(self.net, 0.1)",
    "self.opt = make_optimizer([*self.net.parameters(), *self.aux.parameters()], 0.1)")

# the loss module one object further: a plain helper holding a projector it calls
HELPER_TWIN = '''
import torch
from torch import nn


class Projected(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.head = nn.Linear(d, d)

    def forward(self, s, t):
        return (self.head(s) - t).pow(2).mean()


class Distiller:
    def __init__(self, teacher, d):
        self.teacher = teacher
        self.crit = Projected(d)

    def loss(self, x, s):
        with torch.no_grad():
            t = self.teacher(x)
        return self.crit(s, t)


class Loop:
    def __init__(self, student, teacher):
        self.student = student
        self.teacher = teacher
        self.dist = Distiller(teacher, 3)

    def train(self, xs):
        self.optim = torch.optim.Adam(self.student.parameters(), lr=0.01)
        for x in xs:
            value = self.dist.loss(x, self.student(x))
            self.optim.zero_grad()
            value.backward()
            self.optim.step()


torch.manual_seed(0)
loop = Loop(nn.Linear(4, 3), nn.Linear(4, 3))
xs = [torch.randn(8, 4) for _ in range(3)]
before = loop.dist.crit.head.weight.detach().clone()
loop.train(xs)
MOVED = (loop.dist.crit.head.weight - before).abs().max().item()
'''
# the look-alike: the distiller's own module is the frozen teacher only (no projector)
HELPER_LOOKALIKE = HELPER_TWIN.replace(
    "        return (self.head(s) - t).pow(2).mean()",
    "        return (s - t).pow(2).mean()").replace(
    "before = loop.dist.crit.head.weight.detach().clone()",
    "before = loop.student.weight.detach().clone()").replace(
    "MOVED = (loop.dist.crit.head.weight - before)", "MOVED = 1.0 + 0 * (loop.student.weight - before)")

# look-alike: the loss module's parameters go to a second optimizer the class steps too
TWO_OPTIMIZERS = CENTER_TWIN.replace(
    "        self.opt = make_optimizer(self.net, 0.1)",
    "        self.opt = make_optimizer(self.net, 0.1)\n"
    "        self.aux_opt = torch.optim.SGD(self.aux.parameters(), lr=0.5)").replace(
    "            self.opt.step()", "            self.opt.step()\n            self.aux_opt.step()")
# look-alike: the module that runs in the loss is a teacher under no_grad
TEACHER = HELPER_LOOKALIKE


def _gt559(src: str) -> list[int]:
    return [f.line for f in check_source(textwrap.dedent(src), path="m.py") if f.code == "GT559"]


def _line(src: str, text: str) -> int:
    return next(i for i, s in enumerate(src.splitlines(), 1) if text in s)


def _moved(src: str) -> float:
    env: dict = {}
    exec(compile(src, "m.py", "exec"), env)  # noqa: S102 - the test's own source
    return env["MOVED"]


@pytest.mark.parametrize("src, line", [
    (CENTER_TWIN, "self.opt = make_optimizer(self.net, 0.1)"),
    (HELPER_TWIN, "self.optim = torch.optim.Adam(self.student.parameters(), lr=0.01)"),
])
def test_loss_module_outside_optimizer_twins(src: str, line: str) -> None:
    assert _gt559(src) == [_line(src, line)]
    assert _moved(src) == 0.0  # the loss module's layer never changes


@pytest.mark.parametrize("src", [CENTER_LOOKALIKE, HELPER_LOOKALIKE, TWO_OPTIMIZERS, TEACHER])
def test_loss_module_outside_optimizer_lookalikes(src: str) -> None:
    assert _gt559(src) == []
    assert _moved(src) > 0.0


# NOTE [optimizer class given] (a class chosen at run time) + NOTE [loss modules] (the loss is
# the module's own output handed back to it): the optimizer of a self-training module over a
# container of its backbone only, while its forward returns the loss of a learned margin head
FORWARD_TWIN = '''
import torch
from torch import nn


def build(parts, name, lr):
    kind = getattr(torch.optim, name)
    return kind(parts.parameters(), lr=lr)


class Margin(nn.Module):
    def __init__(self, d, k):
        super().__init__()
        self.w = nn.Linear(d, k, bias=False)

    def forward(self, f, y):
        return nn.functional.cross_entropy(self.w(f) * 4.0, y)


class Learner(nn.Module):
    def __init__(self, backbone, head):
        super().__init__()
        self.backbone, self.head = backbone, head
        group = nn.ModuleList([self.backbone])
        self.opt = build(group, "SGD", 0.5)

    def forward(self, x, y):
        return self.head(self.backbone(x), y)

    def learn(self, value):
        self.opt.zero_grad()
        value.backward()
        self.opt.step()


torch.manual_seed(0)
learner = Learner(nn.Linear(4, 3), Margin(3, 2))
before = learner.head.w.weight.detach().clone()
for _ in range(3):
    out = learner(torch.randn(8, 4), torch.randint(0, 2, (8,)))
    learner.learn(out)
MOVED = (learner.head.w.weight - before).abs().max().item()
'''
# the look-alike: the head is appended to the container before the optimizer is built
FORWARD_LOOKALIKE = FORWARD_TWIN.replace(
    "        group = nn.ModuleList([self.backbone])\n",
    "        group = nn.ModuleList([self.backbone])\n        group.append(self.head)\n")


def test_optimizer_class_chosen_and_loss_from_forward() -> None:
    assert _gt559(FORWARD_TWIN) == [_line(FORWARD_TWIN, "self.opt = build(group")]
    assert _moved(FORWARD_TWIN) == 0.0
    assert _gt559(FORWARD_LOOKALIKE) == []
    assert _moved(FORWARD_LOOKALIKE) > 0.0


def test_optimizer_class_chosen_is_an_optimizer_kind() -> None:
    import ast

    from gradtrace.lint.analysis.kinds import OPTIMIZER
    from tests.lint.test_analysis_steps import context
    src = '''
import torch
def make(net, key):
    cls = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam}[key]
    return cls(net.parameters(), lr=0.1)
def other(net, key):
    cls = {"sgd": torch.optim.SGD, "mine": MyOptim}[key]
    return cls(net.parameters(), lr=0.1)
def run(model):
    a = make(model, "sgd")
    b = other(model, "sgd")
    c = getattr(torch.optim, "Adam")(model.parameters())
'''
    ctx = context(src)
    run = next(n for n in ast.walk(ctx.tree) if isinstance(n, ast.FunctionDef) and n.name == "run")
    kinds = {s.targets[0].id: ctx.analysis.kind(s.value, ctx.scope(run), s.lineno)  # type: ignore
             for s in run.body}
    assert kinds["a"] is not None and kinds["a"].what == OPTIMIZER
    assert kinds["a"].over == frozenset({"model"})
    assert kinds["b"] is None  # one value is not a torch optimizer class: unknown
    assert kinds["c"] is not None and kinds["c"].what == OPTIMIZER


# NOTE [used layer filtered out] (GT560): a name filter over named_parameters drops a layer two
# classes down; the twin's head reads the layer's output, the look-alike's head drops it
FILTER_TWIN = '''
import torch
from torch import nn


class Mixer(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.mix = nn.Linear(d, d)
        self.summary = nn.Linear(d, d)

    def forward(self, x):
        h = torch.relu(self.mix(x))
        return h, torch.tanh(self.summary(h.mean(1)))


class Encoder(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.mixer = Mixer(d)

    def forward(self, x):
        return self.mixer(x)


class Scorer(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.encoder = Encoder(d)
        self.score = nn.Linear(d, 1)

    def forward(self, x):
        tokens, summary = self.encoder(x)
        return self.score(summary).squeeze(-1)


torch.manual_seed(0)
net = Scorer(6)
kept = [(n, p) for n, p in net.named_parameters() if "summary" not in n]
groups = [{"params": [p for n, p in kept], "weight_decay": 0.0}]
sgd = torch.optim.SGD(groups, lr=0.5)
before = net.encoder.mixer.summary.weight.detach().clone()
for _ in range(3):
    sgd.zero_grad()
    net(torch.randn(4, 5, 6)).pow(2).mean().backward()
    sgd.step()
MOVED = (net.encoder.mixer.summary.weight - before).abs().max().item()
'''
FILTER_LOOKALIKE = FILTER_TWIN.replace(
    "        tokens, summary = self.encoder(x)\n        return self.score(summary).squeeze(-1)",
    "        tokens, _ = self.encoder(x)\n        return self.score(tokens).mean((1, 2))").replace(
    "MOVED = (net.encoder.mixer.summary.weight - before)", "MOVED = 1.0 + 0 * (net.score.weight - net.score.weight)")


def test_used_layer_filtered_from_optimizer() -> None:
    got = [f.line for f in check_source(FILTER_TWIN, path="m.py") if f.code == "GT560"]
    assert got == [_line(FILTER_TWIN, 'kept = [(n, p) for n, p in net.named_parameters()')]
    assert _moved(FILTER_TWIN) == 0.0  # the summary layer gets gradients, never changes
    assert [f for f in check_source(FILTER_LOOKALIKE, path="m.py") if f.code == "GT560"] == []
    assert _moved(FILTER_LOOKALIKE) > 0.0


# NOTE [weighted squared deviations] (GT753): the standard deviation of a masked pooling; the
# twin's mask may be all 0 for a row, the look-alike keeps the weights off 0
POOL_TWIN = '''
import torch
from torch import nn


class MaskedStats(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = nn.Linear(d, d)

    def forward(self, x, mask):
        h = self.proj(x)
        w = mask.float()
        mu = (h * w.unsqueeze(-1)).sum(1) / w.sum(1, keepdim=True).clamp(min=1.0)
        dev = (h - mu.unsqueeze(1)) ** 2
        var = (w.unsqueeze(-1) * dev).sum(1) / w.sum(1, keepdim=True).clamp(min=1.0)
        return torch.cat([mu, var.sqrt()], -1)


torch.manual_seed(0)
pool = MaskedStats(3)
mask = torch.ones(2, 4)
mask[1] = 0.0
pool(torch.randn(2, 4, 3), mask).sum().backward()
NAN = bool(torch.isnan(pool.proj.weight.grad).any())
'''
POOL_LOOKALIKE = POOL_TWIN.replace("        w = mask.float()\n",
                                   "        w = mask.float() + 1e-6\n")


def test_sqrt_of_weighted_variance() -> None:
    got = [f.line for f in check_source(POOL_TWIN, path="m.py") if f.code == "GT753"]
    assert got == [_line(POOL_TWIN, "return torch.cat([mu, var.sqrt()], -1)")]
    env: dict = {}
    exec(compile(POOL_TWIN, "m.py", "exec"), env)  # noqa: S102
    assert env["NAN"]  # the all-zero row's variance is 0: sqrt's gradient is NaN
    assert [f for f in check_source(POOL_LOOKALIKE, path="m.py") if f.code == "GT753"] == []
    env = {}
    exec(compile(POOL_LOOKALIKE, "m.py", "exec"), env)  # noqa: S102
    assert not env["NAN"]


# GT561: one Parameter handed to an optimizer through a helper of the file
PARAM_TWIN = '''
import torch
from torch import nn


def configure(trainable, lr):
    return torch.optim.Adam(trainable, lr=lr)


class Calibrator(nn.Module):
    def __init__(self):
        super().__init__()
        self.log_scale = nn.Parameter(torch.zeros(1))

    def forward(self, logits):
        return logits * self.log_scale.exp()


def fit(logits, labels):
    cal = Calibrator()
    opt = configure(cal.log_scale, 0.01)
    for _ in range(3):
        opt.zero_grad()
        nn.functional.cross_entropy(cal(logits), labels).backward()
        opt.step()


fit(torch.randn(8, 3), torch.randint(0, 3, (8,)))
'''
PARAM_LOOKALIKE = PARAM_TWIN.replace("configure(cal.log_scale, 0.01)", "configure([cal.log_scale], 0.01)")


def test_parameter_given_to_optimizer() -> None:
    got = [f.line for f in check_source(PARAM_TWIN, path="m.py") if f.code == "GT561"]
    assert got == [_line(PARAM_TWIN, "opt = configure(cal.log_scale, 0.01)")]
    with pytest.raises(TypeError, match="iterable of Tensors"):
        exec(compile(PARAM_TWIN, "m.py", "exec"), {})  # noqa: S102
    assert [f for f in check_source(PARAM_LOOKALIKE, path="m.py") if f.code == "GT561"] == []
    exec(compile(PARAM_LOOKALIKE, "m.py", "exec"), {})  # noqa: S102
