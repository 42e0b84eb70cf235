"""Session 30, the lead: a model made again after its optimizer, trained by a helper.

The optimizer holds the first model's tensors; the second model runs and gets gradients that
nothing applies. The run names the line that made the model again (GT404, confirmed at run
time), and says nothing about the first model's layers "never running in a forward pass": they
are the old copy, and that wording would send the reader to ``forward``. A layer that really
never runs keeps its GT820.
"""
from __future__ import annotations

import pytest
from rt_helpers import marked_line

HEAD = """
import torch
import torch.nn as nn

torch.manual_seed(0)
LOADER = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)]
"""

BUGS = {
    "helper_trains": """
def train(model, optimizer, loader):
    for x, y in loader:
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()


def main():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))  # <- cause
    for epoch in range(2):
        train(model, optimizer, LOADER)


main()
""",
    "trainer_attribute": """
class Trainer:
    def __init__(self):
        self.model = nn.Linear(4, 1)
        self.opt = torch.optim.Adam(self.model.parameters())

    def reset(self):
        self.model = nn.Linear(4, 1)  # <- cause

    def fit(self):
        for x, y in LOADER:
            self.opt.zero_grad()
            nn.functional.mse_loss(self.model(x), y).backward()
            self.opt.step()


t = Trainer()
t.reset()
t.fit()
""",
}


def _run_findings(res):
    return [f for f in res.findings if f["source"] != "static"]


@pytest.mark.parametrize("name", sorted(BUGS))
def test_model_made_again_is_named_without_never_ran(run_script, name):
    src = HEAD + BUGS[name]
    res = run_script(src)
    assert res.code == 0, res.err
    first = res.findings[0]
    assert first["line"] == marked_line(src), res.findings
    assert first["code"] == "GT404", first
    assert not any("never ran" in f["message"] for f in res.findings), res.findings


UNUSED = """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)
        self.extra = nn.Linear(4, 1)  # never called

    def forward(self, x):
        return self.fc(x)


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in LOADER:
    opt.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    opt.step()
"""


def test_a_layer_that_never_runs_keeps_its_finding(run_script):
    res = run_script(HEAD + UNUSED)
    assert res.code == 0, res.err
    got = [f for f in _run_findings(res) if f["code"] == "GT820"]
    assert got and "never ran" in got[0]["message"] and "extra" in got[0]["message"], \
        res.findings


# NOTE [graph of untrained parameters reused]: features made once, before the loop, by a module
# no optimizer holds; the second backward() raises; the run names the module's call.
FEATURES = """
class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(6, 4)

    def forward(self, x):
        return torch.tanh(self.proj(x))


encoder = Encoder()
raw = torch.randn(32, 6)
chunks = []
for i in range(0, 32, 8):
    chunks.append(encoder(raw[i:i + 8]){cut})  # <- cause
features = torch.cat(chunks)
head = nn.Linear(4, 1)
opt = torch.optim.SGD(head.parameters(), lr=0.1)
target = torch.randn(32, 1)
for step in range(3):
    sl = slice(8 * (step % 4), 8 * (step % 4) + 8)
    opt.zero_grad()
    nn.functional.mse_loss(head(features[sl]), target[sl]).backward()
    opt.step()
"""


def test_features_with_a_graph_of_untrained_parameters_name_the_encoder_call(run_script):
    src = HEAD + FEATURES.replace("{cut}", "")
    res = run_script(src)
    assert res.code != 0
    first = res.findings[0]
    assert (first["code"], first["line"]) == ("GT507", marked_line(src)), res.findings
    assert "no optimizer holds" in first["message"]


def test_features_made_without_a_graph_are_silent(run_script):
    res = run_script(HEAD + FEATURES.replace("{cut}", ".detach()"))
    assert res.code == 0, res.err
    assert not [f for f in _run_findings(res) if f["code"] == "GT507"], res.findings


def test_a_trained_encoder_under_the_reused_value_is_not_this_diagnosis(run_script):
    src = HEAD + FEATURES.replace("{cut}", "").replace(
        "head.parameters()", "[*head.parameters(), *encoder.parameters()]")
    res = run_script(src)
    assert res.code != 0
    assert not any("no optimizer holds" in f["message"] for f in res.findings), res.findings


# NOTE [grad-off method of a trainer]: a training object's own no-grad method runs a module
# the optimizer trains; the decorator is named, not the call. A module's own decorated
# `generate` keeps its caller (tests/realworld generate_scores_used_for_policy_gradient).
SOLVER = """
class Solver:
    def __init__(self):
        self.encoder = nn.Linear(4, 4)
        self.head = nn.Linear(4, 1)
        self.opt = torch.optim.SGD([*self.encoder.parameters(), *self.head.parameters()], lr=0.1)

    {deco}
    def prepare(self, x):
        return torch.relu(self.encoder(x))

    def step(self, x, y):
        feats = self.prepare(x)
        self.opt.zero_grad()
        nn.functional.mse_loss(self.head(feats), y).backward()
        self.opt.step()


s = Solver()
for x, y in LOADER:
    s.step(x, y)
"""


def test_no_grad_method_of_a_trainer_names_its_decorator(run_script):
    src = HEAD + SOLVER.replace("{deco}", "@torch.no_grad()  # <- cause")
    res = run_script(src)
    assert res.code == 0, res.err
    first = _run_findings(res)[0]
    assert (first["code"], first["line"]) == ("GT201", marked_line(src)), res.findings


def test_trainer_method_with_grad_is_silent(run_script):
    res = run_script(HEAD + SOLVER.replace("{deco}", ""))
    assert res.code == 0, res.err
    assert not _run_findings(res), res.findings


# NOTE [shared value holds the loss's own]: one discriminator pass feeds both losses; the
# generator's step between the two backward() calls is named (detaching the shared output would
# stop the discriminator's own training). The classic GAN shape keeps GT508 at the D loss.
SHARED_D = """
G = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 4))
D = nn.Sequential(nn.Linear(4, 1), nn.Sigmoid())
opt_g, opt_d = torch.optim.Adam(G.parameters()), torch.optim.Adam(D.parameters())
bce = nn.BCELoss()
for x, _ in LOADER:
    fake = G(x)
    pred_fake = D(fake)
    loss_g = bce(pred_fake, torch.ones(8, 1))
    loss_d = bce(pred_fake, torch.zeros(8, 1)) + bce(D(torch.randn(8, 4)), torch.ones(8, 1))
    opt_g.zero_grad()
    loss_g.backward(retain_graph=True)
    opt_g.step()  # <- cause
    opt_d.zero_grad()
    loss_d.backward()
    opt_d.step()
"""

CLASSIC = """
G = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 4))
D = nn.Sequential(nn.Linear(4, 1), nn.Sigmoid())
opt_g, opt_d = torch.optim.Adam(G.parameters()), torch.optim.Adam(D.parameters())
bce = nn.BCELoss()
for x, _ in LOADER:
    fake = G(x)
    loss_g = bce(D(fake), torch.ones(8, 1))
    opt_g.zero_grad()
    loss_g.backward(retain_graph=True)
    opt_g.step()
    loss_d = bce(D(fake), torch.zeros(8, 1))  # <- cause
    opt_d.zero_grad()
    loss_d.backward()
    opt_d.step()
"""


def test_shared_discriminator_output_names_the_step_between(run_script):
    src = HEAD + SHARED_D
    res = run_script(src)
    assert res.code != 0
    first = res.findings[0]
    assert first["line"] == marked_line(src), res.findings


def test_classic_gan_fake_keeps_the_discriminator_loss_line(run_script):
    src = HEAD + CLASSIC
    res = run_script(src)
    assert res.code != 0
    first = res.findings[0]
    assert first["line"] == marked_line(src), res.findings


def test_discriminator_on_a_detached_fake_is_silent(run_script):
    src = HEAD + SHARED_D.replace("bce(pred_fake, torch.zeros(8, 1))",
                                  "bce(D(fake.detach()), torch.zeros(8, 1))")
    res = run_script(src)
    assert res.code == 0, res.err
    assert not _run_findings(res), res.findings


# NOTE [built lazily in forward]: a head built at the first forward, after the optimizer
LAZY = """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.head = None

    def forward(self, x):
        h = torch.relu(self.body(x))
        if self.head is None:
            self.head = nn.Linear(h.shape[1], 1)  # <- cause
        return self.head(h)


net = Net()
{warm}
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for x, y in LOADER:
    opt.zero_grad()
    nn.functional.mse_loss(net(x), y).backward()
    opt.step()
"""


def test_layer_built_at_the_first_forward_after_the_optimizer(run_script):
    src = HEAD + LAZY.replace("{warm}", "")
    res = run_script(src)
    assert res.code == 0, res.err
    first = _run_findings(res)[0]
    assert (first["code"], first["line"]) == ("GT821", marked_line(src)), res.findings


def test_layer_built_by_a_first_forward_before_the_optimizer_is_silent(run_script):
    res = run_script(HEAD + LAZY.replace("{warm}", "net(torch.randn(2, 4))"))
    assert res.code == 0, res.err
    assert not _run_findings(res), res.findings


OWN_OPTIMIZER = """
class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = None
        self.head = nn.Linear(8, 1)
        self.opt = torch.optim.SGD(self.parameters(), lr=0.1)  # <- cause

    def forward(self, x):
        if self.net is None:
            self.net = nn.Linear(x.shape[1], 8)
        return self.head(torch.relu(self.net(x)))


p = Policy()
for x, y in LOADER:
    p.opt.zero_grad()
    nn.functional.mse_loss(p(x), y).backward()
    p.opt.step()
"""


def test_a_class_that_builds_its_own_optimizer_too_early_names_that_line(run_script):
    src = HEAD + OWN_OPTIMIZER
    res = run_script(src)
    assert res.code == 0, res.err
    first = _run_findings(res)[0]
    assert (first["code"], first["line"]) == ("GT821", marked_line(src)), res.findings
