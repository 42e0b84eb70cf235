"""Static misses session 53 left (docs/triage/static54.md): each shape with a buggy twin in
another style and a silent look-alike; the probes in benchmarks/probes/static54/ ran on torch
2.13 (the crash text or a weight that never moves)."""
from __future__ import annotations

import sys
import textwrap

import pytest

from gradtrace.lint import check_paths, check_source
from gradtrace.lint.config import Settings


@pytest.fixture(autouse=True)
def _modules_as_before(tmp_path):
    """Nothing here imports its tmp_path files; should a later edit do so, none stays in
    sys.modules."""
    before = set(sys.modules)
    yield
    for name in [k for k in set(sys.modules) - before
                 if str(getattr(sys.modules[k], "__file__", "") or "").startswith(str(tmp_path))]:
        del sys.modules[name]


def _src(code: str) -> str:
    return textwrap.dedent(code).lstrip("\n")


def _found(src: str, *codes: str) -> list[tuple[str, int]]:
    return sorted((f.code, f.line) for f in check_source(_src(src), "m.py") if f.code in codes)


def _project(tmp_path, files: dict[str, str], *codes: str) -> list[tuple[str, str, int]]:
    for name, text in files.items():
        (tmp_path / name).write_text(_src(text))
    found = check_paths([str(tmp_path)], Settings()).findings
    return sorted((f.path.rpartition("/")[2], f.code, f.line) for f in found if f.code in codes)


# -- 1. GT544: one reading of "a scheduler" (`self.sched`, a local, a parameter) ------------
TRAINER_SCHED = """
import torch
import torch.nn.functional as F


class Trainer:
    def __init__(self, model):
        self.model = model
        self.sched = None

    def fit(self, loader):
        opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.sched = torch.optim.lr_scheduler.StepLR(opt, 10)
        for x, y in loader:
            opt.zero_grad()
            F.mse_loss(self.model(x), y).backward()
            {step}
"""


@pytest.mark.parametrize("step,expected", [
    ("self.sched.step()", [("GT544", 16)]),              # the schedule where opt.step() belongs
    ("opt.step()\n            self.sched.step()", []),   # look-alike: both stepped
    ("pass", [("GT544", 15)]),                           # nothing stepped: at the backward
])
def test_scheduler_attribute_stepped_instead(step: str, expected) -> None:
    assert _found(TRAINER_SCHED.format(step=step), "GT544") == expected


# -- 2. a trainer stepping the scheduler while a base class of another file holds the optimizer
BASE = """
import torch


class BaseTrainer:
    def __init__(self, model, lr=1e-2, epochs=3):
        self.model = model
        self.epochs = epochs
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr)
        self.scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=10)

    def train(self, loader):
        for epoch in range(self.epochs):
            for batch in loader:
                self.training_step(batch)
                {base_step}

    def state(self):
        return {{"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}}
"""

TRAINER = """
import torch.nn.functional as F

from base_trainer import BaseTrainer


class Trainer(BaseTrainer):
    def training_step(self, batch):
        x, y = batch
        self.optimizer.zero_grad()
        loss = F.mse_loss(self.model(x), y)
        loss.backward()
        {step}
        return loss.item()
"""

SCRIPT = """
import torch
from trainer import Trainer

model = torch.nn.Linear(4, 1)
trainer = Trainer(model)
trainer.train([(torch.randn(8, 4), torch.randn(8, 1))] * 4)
{after}
"""


@pytest.mark.parametrize("base_step,after,expected", [
    ("pass", "", [("trainer.py", "GT544", 12)]),  # the weights never move (probe p2)
    ("self.optimizer.step()", "", []),            # look-alike: the base's loop steps it
    ("pass", "trainer.optimizer.step()", []),     # look-alike: the script steps it
])
def test_base_class_of_another_file_holds_the_optimizer(tmp_path, base_step, after,
                                                        expected) -> None:
    files = {"base_trainer.py": BASE.format(base_step=base_step),
             "trainer.py": TRAINER.format(step="self.scheduler.step()"),
             "train.py": SCRIPT.format(after=after)}
    assert _project(tmp_path, files, "GT544") == expected


def test_base_class_same_file_twin() -> None:
    """The twin in one file, the loop in the subclass and the optimizer's name in a dict key
    of the checkpoint (no attribute read by name)."""
    src = BASE.format(base_step="pass").replace("import torch\n", "import torch\nimport torch.nn.functional as F\n") \
        + TRAINER.split("class Trainer", 1)[1].join(["class Trainer", ""]).format(
            step="self.scheduler.step()")
    lines = _src(src).splitlines()
    at = next(i for i, s in enumerate(lines, 1) if "self.scheduler.step()" in s and i > 25)
    assert _found(src, "GT544") == [("GT544", at)]
    assert _found(src.replace('"optimizer": self', 'getattr(self, "optimizer"), "o": self'),
                  "GT544") == []  # read by its name: may be stepped anywhere


# -- 3. `.detach()` before another file's loss method or loss object ------------------------
MODEL = """
import torch.nn as nn


class ClassificationModel(nn.Module):
    def __init__(self, n_in, n_cls):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_in, 16), nn.ReLU(), nn.Linear(16, n_cls))
        self.head = nn.Linear(n_cls, n_cls)
        self.criterion = nn.CrossEntropyLoss()

    def forward(self, x):
        return self.net(x)

    def compute_loss(self, outputs, labels):
        return self.criterion(outputs, labels)

    def probe_loss(self, feats, labels):
        return self.criterion(self.head(feats), labels)
"""

TRAIN = """
import torch

from classification_model import ClassificationModel


def train(model, loader, optimizer):
    for images, labels in loader:
        optimizer.zero_grad()
        outputs = model.forward(images).detach()
        loss = model.{method}(outputs, labels)
        loss.backward()
        optimizer.step()


def main():
    net = ClassificationModel(8, 3)
    data = [(torch.randn(4, 8), torch.randint(0, 3, (4,)))]
    train(net, data, torch.optim.SGD(net.parameters(), lr=0.1))
"""


@pytest.mark.parametrize("method,expected", [
    ("compute_loss", [("train.py", "GT107", 9)]),  # crash: element 0 ... does not require grad
    ("probe_loss", []),                            # look-alike: a trained head on the features
])
def test_detach_before_another_files_loss_method(tmp_path, method, expected) -> None:
    files = {"classification_model.py": MODEL, "train.py": TRAIN.format(method=method)}
    assert _project(tmp_path, files, "GT107", "GT101", "GT102") == expected


LOSSES = """
import torch.nn as nn


class RegressionCriterion:
    def __init__(self):
        self.mse = nn.MSELoss()
        self.act = nn.Tanh()

    def __call__(self, pred, target):
        return self.mse(pred, target) + 0.1 * self.act(pred).abs().mean()
"""

ENGINE = """
import torch

from losses import RegressionCriterion


def fit(model, batches, epochs=2):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = RegressionCriterion()
    for _ in range(epochs):
        for x, y in batches:
            pred = model(x)
            loss = criterion({args})
            opt.zero_grad()
            loss.backward()
            opt.step()
"""


@pytest.mark.parametrize("args,expected", [
    ("pred.detach(), y", [("engine.py", "GT107", 12)]),  # crash: the criterion has no weight
    ("pred, pred.detach().mean(0).expand_as(pred)", []),  # look-alike: a detached target
])
def test_detach_before_another_files_loss_object(tmp_path, args, expected) -> None:
    files = {"losses.py": LOSSES, "engine.py": ENGINE.format(args=args)}
    assert _project(tmp_path, files, "GT107") == expected


# -- 8. GT404: a Parameter added after the optimizer is said added, once ---------------------
ADDED = """
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 2)
        self.bias = nn.Parameter(torch.zeros(2))

    def forward(self, x):
        return self.fc(x) * getattr(self, "scale", 1.0) + self.bias


def set_param(m, name):
    setattr(m, name, nn.Parameter(torch.ones(1)))


def add(m):
    m.{attr} = nn.Parameter(torch.ones({n}))


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
add(model)
for _ in range(3):
    opt.zero_grad()
    model(torch.randn(8, 6)).pow(2).mean().backward()
    opt.step()
"""


@pytest.mark.parametrize("attr,n,verb", [
    ("scale", 1, "`model.scale` is added after"),    # new: registered, never stepped
    ("bias", 2, "`model.bias` is replaced after"),   # an existing one replaced
])
def test_parameter_added_by_a_helper_is_said_added(attr, n, verb) -> None:
    found = [f for f in check_source(_src(ADDED.format(attr=attr, n=n)), "m.py")
             if f.code == "GT404"]
    assert [(f.line, f.message.startswith(verb)) for f in found] == [(20, True)]


METHOD = """
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 2)

    def add_scale(self):
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, x):
        return self.fc(x) * getattr(self, "scale", 1.0)


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
{add}
for _ in range(3):
    opt.zero_grad()
    model(torch.randn(8, 6)).pow(2).mean().backward()
    opt.step()
"""


@pytest.mark.parametrize("add,line", [
    ("model.add_scale()", 11),                            # a method adds it: reported there
    ("model.scale = nn.Parameter(torch.ones(1))", 19),   # the script adds it
])
def test_parameter_added_by_a_method_or_the_script(add, line) -> None:
    found = [f for f in check_source(_src(METHOD.format(add=add)), "m.py") if f.code == "GT404"]
    assert [(f.line, f.message) for f in found] == [(line, (
        "`model.scale` is added after the optimizer `opt` was built (line 18): `opt` does not "
        "hold it, so `opt.step()` never updates it"))]


# -- 4. an LBFGS closure handed as a bound method or a function of the file ------------------
PINN = """
import torch
import torch.nn as nn


def residual(net, x):
    u = net(x)
    du = torch.autograd.grad(u, x, torch.ones_like(u), create_graph=True)[0]
    return ((du - torch.cos(x)) ** 2).mean() + (u[0] ** 2).sum()


class PINN:
    def __init__(self, n=32):
        self.net = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))
        self.x = torch.linspace(0, 1, n).unsqueeze(1).requires_grad_(True)
        self.optimizer = torch.optim.LBFGS(self.net.parameters(), lr=1.0, max_iter=50)

    def loss_pinn(self):
        {clear}
        loss = residual(self.net, self.x)
        loss.backward()
        return loss

    def train(self):
        self.optimizer.step(self.loss_pinn)
"""


@pytest.mark.parametrize("clear,expected", [
    ("pass", [("GT721", 20)]),                    # err 0.38 against 0.0015 (probe p4c)
    ("self.optimizer.zero_grad()", []),           # look-alike: cleared in the closure
])
def test_lbfgs_closure_is_a_bound_method(clear, expected) -> None:
    assert _found(PINN.format(clear=clear), "GT721") == expected


FIT = """
import torch


def closure():
    loss = ((model(x) - y) ** 2).mean()
    {clear}
    loss.backward()
    return loss


def fit(steps):
    opt = torch.optim.LBFGS(model.parameters())
    for _ in range(steps):
        opt.step(closure)


x, y = torch.randn(64, 3), torch.randn(64, 1)
model = torch.nn.Linear(3, 1)
fit(5)
"""


@pytest.mark.parametrize("clear,expected", [
    ("pass", [("GT721", 7)]),              # a function of the file, stepped in another
    ("model.zero_grad()", []),             # look-alike: cleared before the backward
])
def test_lbfgs_closure_is_a_function_of_the_file(clear, expected) -> None:
    assert _found(FIT.format(clear=clear), "GT721") == expected


# -- 6. s07: a function torch.func differentiates returns a cut value -----------------------
FUNC = """
import torch
import torch.nn.functional as F
from torch import func


def loss_fn(p, x, y):
    pred = func.functional_call(model, p, (x,))
    loss = F.mse_loss(pred, y)
    return {ret}


model = torch.nn.Linear(3, 1)
params = {{k: v.detach() for k, v in model.named_parameters()}}
x, y = torch.randn(8, 3), torch.randn(8, 1)
g, aux = func.grad_and_value(loss_fn, has_aux={aux})(params, x, y)
"""


@pytest.mark.parametrize("ret,aux,expected", [
    ("loss.detach()", False, [("GT149", 9)]),          # all-zero gradients (probe p6s07)
    ("torch.as_tensor(loss.item())", False, [("GT149", 9)]),
    ("loss, loss.item()", True, []),                    # look-alike: the number is the aux
])
def test_function_differentiated_by_torch_func(ret, aux, expected) -> None:
    assert _found(FUNC.format(ret=ret, aux=aux), "GT149") == expected


# -- 6. mp6: the generator's loss in a helper of another file detaches its output -----------
GAN_STEPS = """
import torch
import torch.nn.functional as F


def generator_loss(gen, disc, z):
    fake = {fake}
    logits = disc(fake)
    return F.binary_cross_entropy_with_logits(logits, torch.ones_like(logits))
"""

GAN_TRAIN = """
import torch
import gan_steps


def train_gan(gen, disc, batches):
    opt_g = torch.optim.Adam(gen.parameters(), 2e-4)
    for z in batches:
        opt_g.zero_grad()
        loss = gan_steps.generator_loss(gen, disc, z)
        loss.backward()
        opt_g.step()


train_gan(torch.nn.Linear(8, 4), torch.nn.Linear(4, 1), [torch.randn(8, 8)] * 3)
"""


@pytest.mark.parametrize("fake,expected", [
    ("gen(z).detach()", [("train.py", "GT580", 9)]),  # the generator never moves (probe mp6)
    ("gen(z)", []),                                    # look-alike: attached
])
def test_generator_output_detached_in_another_file(tmp_path, fake, expected) -> None:
    files = {"gan_steps.py": GAN_STEPS.format(fake=fake), "train.py": GAN_TRAIN}
    assert _project(tmp_path, files, "GT580") == expected
