"""Session-27 run-time diagnoses of crashes (docs/triage/runtime27b.md):

- NOTE [handed through a helper] (runtime/trace/handed_through.py): an optimizer refused a
  single tensor inside a helper that only passed its own parameter on: the caller that handed
  the tensor in is named; a helper that computes the value itself keeps the construction;
- NOTE [built for a value the resume rebinds] (runtime/trace/posthoc_state.py): an optimizer's
  state refused at load, when the optimizer was built from a value the resume then rebinds
  (the start epoch that decides the trainable layers): the build is named; a resume that only
  hands the same model back keeps the load's line.

Buggy twins (code + line asserted), twins whose other line stays the cause, and silent
look-alikes. Real torch, in-process: every bug below crashes on real torch.
"""
from __future__ import annotations

import pytest
from rt_helpers import marked_line

HEAD = """
import io

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
"""


def _first(res):
    assert res.findings, res.err
    return res.findings[0]


def _run_line(f):
    """The line the run itself named: the finding's, or (fused into a static finding that
    keeps its own line) the one of its "confirmed at run time" entry."""
    return next((r["line"] for r in f["related"] if r["message"].startswith("confirmed at run")),
                f["line"])


def _check(run_script, src, code):
    res = run_script(src)
    assert res.code != 0, res.err
    f = _first(res)
    assert f["code"] == code, res.err
    assert _run_line(f) == marked_line(src), res.err


def _silent(run_script, src):
    res = run_script(src)
    assert res.code == 0, res.err
    assert [f for f in res.findings if f["source"] != "static"] == [], res.err


# ---- a single tensor handed to an optimizer-building helper (NOTE [handed through a helper]) --

HANDED_BUGS = {
    # Dassl's shape: a module-level call hands the prompt vectors to the builder
    "module_call": """
def build_optimizer(params, lr=2e-3):
    return torch.optim.SGD(params, lr=lr, momentum=0.9)


class Prompt(nn.Module):
    def __init__(self):
        super().__init__()
        self.ctx = nn.Parameter(torch.randn(4, 8) * 0.02)

    def forward(self, x):
        return x + self.ctx.mean(0)


prompt = Prompt()
opt = build_optimizer(prompt.ctx)  # <- cause
loss = prompt(torch.randn(3, 8)).pow(2).sum()
loss.backward()
opt.step()
""",
    # a variant the case does not show: a trainer method hands it by keyword to a method
    "method_keyword": """
class Trainer:
    def __init__(self):
        self.scale = nn.Parameter(torch.ones(8))
        self.opt = self.make_optimizer(lr=0.1, params=self.scale)  # <- cause

    def make_optimizer(self, params, lr):
        return torch.optim.Adam(params=params, lr=lr)


t = Trainer()
(torch.randn(2, 8) * t.scale).sum().backward()
t.opt.step()
""",
}

# the helper computes the value itself: its own construction is the line to change
KEPT_BUGS = {
    "computed_in_helper": """
def build_optimizer(model, lr=0.1):
    params = model.weight
    return torch.optim.SGD(params, lr=lr)  # <- cause


net = nn.Linear(4, 2)
opt = build_optimizer(net)
net(torch.randn(3, 4)).sum().backward()
opt.step()
""",
}

HANDED_LOOKALIKES = {
    "wrapped_in_list": """
def build_optimizer(params, lr=2e-3):
    return torch.optim.SGD(params, lr=lr, momentum=0.9)


ctx = nn.Parameter(torch.randn(4, 8))
opt = build_optimizer([ctx])
(ctx * 2).sum().backward()
opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(HANDED_BUGS))
def test_tensor_handed_to_an_optimizer_helper_names_the_caller(run_script, name):
    _check(run_script, HEAD + HANDED_BUGS[name], "GT835")


@pytest.mark.parametrize("name", sorted(KEPT_BUGS))
def test_value_computed_in_the_helper_keeps_the_construction(run_script, name):
    _check(run_script, HEAD + KEPT_BUGS[name], "GT835")


@pytest.mark.parametrize("name", sorted(HANDED_LOOKALIKES))
def test_list_handed_to_an_optimizer_helper_is_silent(run_script, name):
    _silent(run_script, HEAD + HANDED_LOOKALIKES[name])


# ---- an optimizer built for a value the resume rebinds (NOTE [built for a value ...]) --------

RESUME_HEAD = """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(4, 4)
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.backbone(x))


def build_optimizer(model, epoch):
    model.backbone.requires_grad_(epoch >= 5)
    return torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)


def checkpoint_at_epoch_5():
    model = Net()
    opt = build_optimizer(model, 5)
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    buf = io.BytesIO()
    torch.save({"epoch": 5, "model": model.state_dict(), "opt": opt.state_dict()}, buf)
    buf.seek(0)
    return torch.load(buf)


def resume(model, opt, ckpt):
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["opt"])
    return model, opt, ckpt["epoch"]


class cfg:
    start_epoch = 0
"""

RESUME_BUGS = {
    # pysot's shape: the resume hands the model back and rebinds the epoch in one statement
    "rebound_by_the_resume": """
ckpt = checkpoint_at_epoch_5()
model = Net()
opt = build_optimizer(model, cfg.start_epoch)  # <- cause
model, opt, cfg.start_epoch = resume(model, opt, ckpt)
""",
    # a variant the case does not show: the epoch is read on its own line before the load
    "rebound_before_the_load": """
def main():
    ckpt = checkpoint_at_epoch_5()
    model = Net()
    start_epoch = 0
    opt = build_optimizer(model, start_epoch)  # <- cause
    start_epoch = ckpt["epoch"]
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["opt"])


main()
""",
}

# the build reads nothing the resume rebinds (it hands the same model back): the load's line
LOAD_KEPT_BUGS = {
    "same_model_handed_back": """
ckpt = checkpoint_at_epoch_5()
model = Net()
opt = build_optimizer(model, 0)
model, opt, start_epoch = resume(model, opt, ckpt)  # <- cause
""",
}

RESUME_LOOKALIKES = {
    "built_after_the_resume": """
ckpt = checkpoint_at_epoch_5()
model = Net()
model.load_state_dict(ckpt["model"])
cfg.start_epoch = ckpt["epoch"]
opt = build_optimizer(model, cfg.start_epoch)
opt.load_state_dict(ckpt["opt"])
model(torch.randn(2, 4)).sum().backward()
opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(RESUME_BUGS))
def test_optimizer_built_for_a_value_the_resume_rebinds_names_the_build(run_script, name):
    _check(run_script, HEAD + RESUME_HEAD + RESUME_BUGS[name], "GT831")


@pytest.mark.parametrize("name", sorted(LOAD_KEPT_BUGS))
def test_resume_handing_the_model_back_keeps_the_load(run_script, name):
    _check(run_script, HEAD + RESUME_HEAD + LOAD_KEPT_BUGS[name], "GT831")


@pytest.mark.parametrize("name", sorted(RESUME_LOOKALIKES))
def test_optimizer_built_after_the_resume_is_silent(run_script, name):
    _silent(run_script, HEAD + RESUME_HEAD + RESUME_LOOKALIKES[name])


# ---- a value computed before the step handed to a loss function (NOTE [stale value ...]) -----

GAN_HEAD = """
netG = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 6))
netD = nn.Sequential(nn.Linear(6, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1), nn.Sigmoid())
optG = torch.optim.Adam(netG.parameters())
optD = torch.optim.Adam(netD.parameters())
"""

STALE_BUGS = {
    # SRGAN's shape: a loss module's forward reads the discriminator output it is handed
    "loss_module": """
class GeneratorLoss(nn.Module):
    def forward(self, out_labels, out_images, target_images):
        adversarial = torch.mean(1 - out_labels)
        return F.mse_loss(out_images, target_images) + 0.001 * adversarial


criterion = GeneratorLoss()
for _ in range(2):
    real, fake = torch.randn(4, 6), netG(torch.randn(4, 4))
    optD.zero_grad()
    fake_out = netD(fake).mean()
    d_loss = 1 - netD(real).mean() + fake_out
    d_loss.backward(retain_graph=True)
    optD.step()
    optG.zero_grad()
    g_loss = criterion(fake_out, fake, real)  # <- cause
    g_loss.backward()
    optG.step()
""",
    # a variant the case does not show: a plain function, called by keyword, inside a method
    "helper_by_keyword": """
def generator_loss(fake, real, d_score):
    return F.l1_loss(fake, real) - torch.log(d_score + 1e-8).mean()


class Trainer:
    def step(self):
        real, fake = torch.randn(4, 6), netG(torch.randn(4, 4))
        optD.zero_grad()
        score = netD(fake)
        (F.relu(1 - netD(real)) + F.relu(1 + score)).mean().backward(retain_graph=True)
        optD.step()
        optG.zero_grad()
        loss = generator_loss(fake, real, d_score=score)  # <- cause
        loss.backward()
        optG.step()


Trainer().step()
""",
}

# the stale value is consumed in the backward's own function: that line is the one to change
STALE_KEPT_BUGS = {
    "consumed_inline": """
for _ in range(2):
    real, fake = torch.randn(4, 6), netG(torch.randn(4, 4))
    optD.zero_grad()
    fake_out = netD(fake).mean()
    d_loss = 1 - netD(real).mean() + fake_out
    d_loss.backward(retain_graph=True)
    optD.step()
    optG.zero_grad()
    g_loss = F.mse_loss(fake, real) + 0.001 * (1 - fake_out)  # <- cause
    g_loss.backward()
    optG.step()
""",
}

STALE_LOOKALIKES = {
    "recomputed_after_the_step": """
class GeneratorLoss(nn.Module):
    def forward(self, out_labels, out_images, target_images):
        return F.mse_loss(out_images, target_images) + 0.001 * torch.mean(1 - out_labels)


criterion = GeneratorLoss()
for _ in range(2):
    real, fake = torch.randn(4, 6), netG(torch.randn(4, 4))
    optD.zero_grad()
    fake_out = netD(fake.detach()).mean()
    d_loss = 1 - netD(real).mean() + fake_out
    d_loss.backward()
    optD.step()
    optG.zero_grad()
    fake_out = netD(fake).mean()
    g_loss = criterion(fake_out, fake, real)
    g_loss.backward()
    optG.step()
""",
}


@pytest.mark.parametrize("name", sorted(STALE_BUGS))
def test_stale_value_handed_to_a_loss_function_names_the_call(run_script, name):
    _check(run_script, HEAD + GAN_HEAD + STALE_BUGS[name], "GT601")


@pytest.mark.parametrize("name", sorted(STALE_KEPT_BUGS))
def test_stale_value_consumed_in_place_keeps_the_consumer(run_script, name):
    _check(run_script, HEAD + GAN_HEAD + STALE_KEPT_BUGS[name], "GT601")


@pytest.mark.parametrize("name", sorted(STALE_LOOKALIKES))
def test_value_recomputed_after_the_step_is_silent(run_script, name):
    _silent(run_script, HEAD + GAN_HEAD + STALE_LOOKALIKES[name])
