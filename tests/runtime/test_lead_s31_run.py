"""Session 31, the lead: a perceptual loss whose features of the generated image are taken
under ``no_grad`` (NOTE [term read under no_grad]). The run sees a loss term with no graph
added to one that has a graph (GT844) at the statement that read the generated image under
the block, the line to take out of it (the real image's features stay there); the checker's
GT218 at the ``with`` is attached as context. With the generated image's features taken with
grad the run is silent."""
from __future__ import annotations

from rt_helpers import marked_line

SRC = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8))
vgg = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
for p in vgg.parameters():
    p.requires_grad_(False)
opt = torch.optim.Adam(G.parameters(), lr=1e-3)
loader = [(torch.randn(4, 8), torch.randn(4, 8)) for _ in range(4)]


def train():
    for lr_img, hr_img in loader:
        fake = G(lr_img)
        l1 = F.l1_loss(fake, hr_img)
        with torch.no_grad():
            f_real = vgg(hr_img)
            f_fake = vgg(fake)  # <- cause
        loss = l1 + 0.01 * F.mse_loss(f_fake, f_real)
        opt.zero_grad()
        loss.backward()
        opt.step()


train()
"""


def test_perceptual_features_under_no_grad_lead_with_the_statement(run_script):
    res = run_script(SRC)
    assert res.code == 0, res.err
    first = res.findings[0]
    assert (first["code"], first["line"], first["source"]) == (
        "GT844", marked_line(SRC), "static+runtime"), res.findings
    block = marked_line(SRC) - 2
    assert any("GT218" in r["message"] and r["line"] == block for r in first["related"]), first


def test_features_of_the_output_taken_with_grad_are_silent(run_script):
    fixed = SRC.replace("            f_fake = vgg(fake)\n", "").replace(
        "F.mse_loss(f_fake, f_real)", "F.mse_loss(vgg(fake), f_real)")
    res = run_script(fixed)
    assert res.code == 0, res.err
    assert [f for f in res.findings if f["code"] in ("GT218", "GT844")] == [], res.findings


# NOTE [lazy layer line]: the class builds a layer in forward; its user builds the optimizer
# first, the usual order. The run names the layer (GT821) and the checker's GT464, now on the
# same line, confirms it.
LAZY = """
import torch
import torch.nn as nn

torch.manual_seed(0)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(6, 8)
        self.out = None

    def forward(self, x):
        h = torch.relu(self.body(x))
        if self.out is None:
            self.out = nn.Linear(h.shape[1], 2)  # <- cause
        return self.out(h)


model = Encoder()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for _ in range(3):
    x, y = torch.randn(8, 6), torch.randint(0, 2, (8,))
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
"""


def test_lazy_layer_is_named_by_both_faces_at_its_line(run_script):
    res = run_script(LAZY)
    assert res.code == 0, res.err
    first = res.findings[0]
    assert (first["code"], first["line"], first["source"]) == (
        "GT821", marked_line(LAZY), "static+runtime"), res.findings
    assert any("GT464" in r["message"] for r in first["related"]), first


# NOTE [gradient cleared before the step]: the program clears one layer's gradients after
# backward() on purpose (DINO freezes the student's last layer for the first epoch); that layer
# received gradients. A layer cut from the loss by a detach still never receives one.
CANCEL = """
import torch
import torch.nn as nn

torch.manual_seed(0)
body, last = nn.Linear(6, 8), nn.Linear(8, 4)
opt = torch.optim.SGD(list(body.parameters()) + list(last.parameters()), lr=0.1)
for epoch in range(3):
    x = torch.randn(8, 6)
    loss = last(torch.relu(body(x){cut})).pow(2).mean()  # <- cause
    opt.zero_grad()
    loss.backward()
    last.bias.grad = None
    opt.step()
h = (last.bias - 0).abs().max().item()
"""


def test_gradients_cleared_on_purpose_are_not_never_received(run_script):
    res = run_script(CANCEL.replace("{cut}", ""))
    assert res.code == 0, res.err
    assert not any("never received a gradient" in f["message"] for f in res.findings), \
        res.findings


def test_a_detached_body_still_never_receives_a_gradient(run_script):
    src = CANCEL.replace("{cut}", ".detach()")
    res = run_script(src)
    assert res.code == 0, res.err
    got = [f for f in res.findings if "never received a gradient" in f["message"]]
    assert got and got[0]["code"] == "GT107" and got[0]["line"] == marked_line(src), \
        res.findings
    assert "Linear.bias" in got[0]["message"] and got[0]["message"].count("Linear") == 2


# NOTE [cut after the last backward]: a layer whose output the model leaves unused on purpose
# (the penultimate hidden state is selected) gets no gradient; the `.item()` of a measurement
# after training reads it and is no cut on any loss path: the run says nothing of it. A
# `.item()` before the backward() that really cuts the path keeps its finding.
AFTER = """
import torch
import torch.nn as nn

torch.manual_seed(0)
layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))
head = nn.Linear(4, 1)
opt = torch.optim.SGD(list(layers.parameters()) + list(head.parameters()), lr=0.1)
start = [p.detach().clone() for p in layers.parameters()]
for _ in range(3):
    h, states = torch.randn(8, 4), []
    for layer in layers:
        h = torch.relu(layer(h))
        states.append(h)
    loss = head(states[-2]).pow(2).mean(){cut}
    opt.zero_grad()
    loss.backward()
    opt.step()
moved = sum((p - q).norm() for p, q in zip(layers.parameters(), start)).item()
"""


def test_a_measurement_after_training_is_no_cut(run_script):
    res = run_script(AFTER.replace("{cut}", ""))
    assert res.code == 0, res.err
    assert not any("cut here" in f["message"] for f in res.findings), res.findings


def test_a_cut_before_the_backward_keeps_its_finding(run_script):
    src = AFTER.replace("{cut}", "\n    loss = torch.tensor(loss.item(), requires_grad=True)")
    res = run_script(src)
    assert res.code == 0, res.err
    first = res.findings[0]
    assert first["code"] in ("GT101", "GT102", "GT106") and "item" in first["message"], \
        res.findings
