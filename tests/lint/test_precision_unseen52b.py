"""Shapes from the projects of docs/triage/unseen52b.md (session 52), each in another
spelling than the project's and next to a buggy twin that is still reported; the torch ones
run on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
'''

# a linear probe on frozen features: the loss is a method of an object holding the probe
PROBE = '''
class {base}:
    def __init__(self):
{init}
    def get_loss(self, feats, y):
        return F.cross_entropy({logits}, y)


def train(encoder, probe, batches, opt):
    for x, y in batches:
{clear}
        with torch.no_grad():
            z = encoder(x)
        total = probe.get_loss(z, y)
        opt.zero_grad()
        total.backward()
        opt.step()
encoder, probe = nn.Linear(5, 4), Probe()
opt = torch.optim.SGD({params}, lr=0.1)
train(encoder, probe, [(torch.randn(6, 5), torch.randint(0, 4, (6,)))], opt)
'''

# a MAML inner step over two heads on one feature: one gradient pass per head's parameters
HEADS = '''
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.head_a, self.head_b = nn.Linear(5, 4), nn.Linear(4, 2), nn.Linear(4, 3)
        self.eta = 0.5

    def inner(self, x, y, t, lr=0.1):
        feat = torch.tanh(self.body(x))
        loss = F.cross_entropy(self.head_a(feat), y) + self.eta * F.cross_entropy(self.head_b(feat), t)
        g_body = torch.autograd.grad(loss, self.body.parameters(), retain_graph=True)
        g_a = torch.autograd.grad(loss, self.{first}.parameters())
        g_b = torch.autograd.grad(loss, self.head_b.parameters())
        return g_body, g_a, g_b
net = Net()
grads = net.inner(torch.randn(6, 5), torch.randint(0, 2, (6,)), torch.randint(0, 3, (6,)))
'''

# test-time refinement of a model's output: the detached copy is the leaf an optimizer trains
REFINE = '''
def refine(model, x, target):
    x_in = model(x)
    x_in = x_in.detach().clone()
    x_ref = x_in.detach().clone()
    x_in.requires_grad = True
    opt = torch.optim.Adam({params}, lr=5e-2)
    for j in range(5):
        loss_sum = F.mse_loss(x_in * 2, target) + 0.1 * F.mse_loss(x_in, x_ref)
        opt.zero_grad()
        loss_sum.backward()
        opt.step()
    return x_in
model = nn.Linear(3, 3)
x_in = refine(model, torch.randn(4, 3), torch.zeros(4, 3))
'''

# a trainer standardising its data channels, constant ones guarded by an element write
NORMALISE = '''
data = torch.randn(16, 3)
data[:, 2] = 1.0
avg = data.mean(dim=0)
std = data.std(dim=0)
{guard}
data = (data - avg) / std
net = nn.Linear(3, 1)
loss = net(data).pow(2).mean()
loss.backward()
'''

# an attention layer making its mask on every call
MASKED = '''
class Attend(nn.Module):
    def __init__(self):
        super().__init__()
        self.out = nn.Linear(4, 4)

    def make_mask(self, n, k):
        mask = nn.Parameter(torch.ones(1){rg})
        return mask.repeat(k).unsqueeze(0).repeat(n, 1)

    def forward(self, x):
        return self.out(x) * self.make_mask(x.size(0), x.size(1))
net = Attend()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
net(torch.randn(3, 4)).sum().backward()
opt.step()
'''

# a warm-up freeze on a part of a model whose class the checker cannot see built
WARM = '''
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone, self.head = nn.Linear(3, 3), nn.Linear(3, 1)
        self.scale = torch.ones(1)

    def forward(self, x):
        return self.head(self.backbone(x)) * self.scale
MODELS = {{"net": Net}}


def train(x):
    model = MODELS["net"]()
    model.{part}.requires_grad = False
    trainable = model.backbone.weight.requires_grad
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()
        if epoch == 0:
            for p in model.backbone.parameters():
                p.requires_grad_(True)
    return trainable
trainable = train(torch.randn(4, 3))
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # Spijkervet/contrastive-predictive-coding (speaker probe): `loss.zero_grad()`, the CPC
    # features under `no_grad`, `loss.get_loss(x, z, c, ...)` of `Speaker_Loss`, an
    # `nn.Module` of another file whose linear classifier the optimizer trains; GT201 read the
    # method as a loss function of its (dead) arguments. Twin: a plain object whose loss uses
    # only the dead features (reported; backward raises).
    "probe-loss-method": (
        Shape(PROBE.format(base="Probe(nn.Module)",
                           init="        super().__init__()\n        self.head = nn.Linear(4, 4)",
                           logits="self.head(feats)", clear="        probe.zero_grad()",
                           params="probe.parameters()"),
              "GT201", holds="probe.head.weight.grad is not None"),
        Shape(PROBE.format(base="Probe", init="        self.t = 1.0", logits="feats / self.t",
                           clear="        pass", params="encoder.parameters()"),
              "GT201", line=11, raises=(RuntimeError, "does not require grad"))),
    # jncsnlp/FSL-Multimodal-Rumor-Detection (COMFUSE's MAML step): `autograd.grad(loss,
    # classifier_binary.parameters())` then `autograd.grad(loss, classifier_topic.parameters())`
    # on `loss = CE(binary(feat)) + eta * CE(topic(feat))`; GT509 said the first pass frees
    # what the second needs. Each runs only its head's nodes and the sum above them. Twin:
    # the first pass is over the body's parameters (it runs both heads' nodes; the second
    # raises).
    "passes-over-separate-heads": (
        Shape(HEADS.format(first="head_a"), "GT509", holds="len(grads[2]) == 2"),
        Shape(HEADS.replace("self.body.parameters(), retain_graph=True",
                            "self.head_a.parameters(), retain_graph=True").format(first="body"),
              "GT509", line=11, raises=(RuntimeError, "second time"))),
    # korrawe/guided-motion-diffusion (`sample/condition.py`): `x_in = x_in.detach().clone()`,
    # `x_in.requires_grad = True`, `opt = optim.Adam([x_in])`: the sampled motion is refined
    # by its own optimizer; GT107 said the detach cuts the model off the loss. Twin: the
    # optimizer is over the model's parameters (the re-wrap as a band-aid: reported; the
    # model gets no gradient).
    "optimized-detached-leaf": (
        Shape(REFINE.format(params="[x_in]"), "GT107", holds="x_in.grad is not None"),
        Shape(REFINE.format(params="model.parameters()"), "GT107", line=3,
              holds="model.weight.grad is None")),
    # realcrane/Human-Motion-Prediction-under-Unexpected-Perturbation (8 trainers): `std =
    # mocap_data.std(dim=0)`, `std[std == 0] = 1.0`, then `(mocap_data - avg) / std`; GT776
    # read the bare deviation. Twin: no guard (reported; the constant channel is NaN).
    "guarded-deviation": (
        Shape(NORMALISE.format(guard="std[std == 0] = 1.0"), "GT776",
              holds="torch.isfinite(net.weight.grad).all()"),
        Shape(NORMALISE.format(guard="pass"), "GT776", line=4,
              holds="not torch.isfinite(net.weight.grad).all()")),
    # shrija14/Multilingual-Deep-Neural-Math-Word-Problem-Solver (`Attention_1.init_mask`):
    # `mask = Parameter(torch.ones(1), requires_grad=False)` made on each call and turned into
    # a byte mask; GT445 said the optimizer never updates it (nothing is meant to). Twin: a
    # Parameter that wants a gradient (reported; it is in no optimizer).
    "frozen-parameter-mask": (
        Shape(MASKED.format(rg=", requires_grad=False"), "GT445",
              holds="len(list(net.parameters())) == 2"),
        Shape(MASKED.format(rg=""), "GT445", line=7,
              holds="len(opt.param_groups[0]['params']) == 2")),
    # injected in Megatvini/DeepFaceForgeryDetection (recall): `model.resnet.requires_grad =
    # False` on a submodule of a class built in another file; the script's own
    # `model.resnet.parameters()` says it is a module (NOTE [module receivers]). Look-alike: the
    # flag set on a tensor attribute (silent); twin: on the module part (reported; its weight
    # still requires grad).
    "module-by-its-parameters": (
        Shape(WARM.format(part="scale"), "GT407", holds="trainable"),
        Shape(WARM.format(part="backbone"), "GT407", line=14, holds="trainable")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
@pytest.mark.parametrize("which", [0, 1], ids=["look-alike", "twin"])
def test_shape(name: str, which: int) -> None:
    judge(PRELUDE, SHAPES[name][which])


# injected in SookX/wav2vec-torch (recall): `train_step(model, epochs, optimizer, loss_fn,
# scheduler, ...)` of `utils.py` steps `scheduler` where `optimizer.step()` belongs; the
# script `pipeline.py` builds both from `torch.optim` and passes them (NOTE [kinds by the
# callers]). Look-alike: the step is there (silent); twin: the schedule stepped in its place
# (reported on that line; the weights never change).
TRAIN = '''
import torch
import torch.nn.functional as F


def train_step(model, optimizer, scheduler, batches):
    for x, y in batches:
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        {step}
    scheduler.step()
'''

SCRIPT = '''
import torch
from .utils import train_step

model = torch.nn.Linear(3, 1)
before = model.weight.detach().clone()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=5)
train_step(model, optimizer, scheduler, [(torch.randn(4, 3), torch.randn(4, 1))] * 3)
'''


@pytest.mark.parametrize("step,lines", [("optimizer.step()", []), ("scheduler.step()", [11])],
                         ids=["look-alike", "twin"])
def test_scheduler_in_place_of_a_passed_optimizer(tmp_path, step: str, lines: list[int]) -> None:
    import importlib
    import sys
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    pkg = tmp_path / "trainpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "utils.py").write_text(TRAIN.replace("{step}", step))
    (pkg / "pipeline.py").write_text(SCRIPT)
    found = check_paths([str(pkg)], Settings()).findings
    assert sorted(f.line for f in found if f.code == "GT544") == lines
    sys.path.insert(0, str(tmp_path))
    try:
        for m in ("trainpkg", "trainpkg.utils", "trainpkg.pipeline"):
            sys.modules.pop(m, None)
        run = importlib.import_module("trainpkg.pipeline")
        assert torch.equal(run.before, run.model.weight) == bool(lines)
    finally:
        sys.path.remove(str(tmp_path))
        for m in ("trainpkg", "trainpkg.utils", "trainpkg.pipeline"):
            sys.modules.pop(m, None)  # another test's `trainpkg` (test_run_module) is its own
