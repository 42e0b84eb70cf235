"""runtime54 on real torch, one process, a few steps, tiny models: the cause's line first.

- A clearing of part of what an optimizer steps (a submodule's `zero_grad()`, by set_to_none or
  by zeroing, the first or the last parameters): named at that clearing
  (NOTE [clear of a part]). Look-alikes: the optimizer's, the whole model's, every part's.
- FGSM's `x.requires_grad = True` after the forward that used `x`: the run's `.grad` read as
  None is explained by the static GT156 on the line that set the flag too late
  (`EXPLAINS["grad-none"]`). Look-alike: the flag set before the forward.
"""
from __future__ import annotations

import runpy

import pytest

from tests.runtime.rt_helpers import marked_line

torch = pytest.importorskip("torch")

PARTIAL = """
import torch
from torch import nn
torch.manual_seed(0)


class AutoEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(6, 2)
        self.decoder = nn.Linear(2, 6)

    def forward(self, x):
        return self.decoder(self.encoder(x))


ae = AutoEncoder()
opt = torch.optim.SGD(ae.parameters(), lr=0.1)
for _ in range(4):
    x = torch.randn(5, 6)
    CLEAR  # <- cause
    loss = nn.functional.mse_loss(ae(x), x)
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize("clear,bug", [
    ("ae.encoder.zero_grad()", True),  # the first parameters cleared, the last accumulate
    ("ae.decoder.zero_grad(set_to_none=False)", True),  # the last zeroed, the first accumulate
    ("opt.zero_grad()", False),
    ("ae.zero_grad()", False),
    ("ae.encoder.zero_grad(); ae.decoder.zero_grad(set_to_none=False)", False),
])
def test_clear_of_a_part_names_the_clearing(tmp_path, clear, bug):
    import gradtrace

    src = PARTIAL.replace("CLEAR", clear).lstrip("\n")
    path = tmp_path / "ae.py"
    path.write_text(src, encoding="utf-8")
    with gradtrace.trace(static=False) as tr:
        runpy.run_path(str(path))
    found = [(f.code, f.line) for f in tr.findings if f.code in ("GT501", "GT823")]
    assert found == ([("GT501", marked_line(src))] if bug else []), tr.findings
    if bug:
        assert "only part" in tr.findings[0].message


FGSM = """
import torch
import torch.nn as nn
import torch.nn.functional as F


def fgsm(model, x, y, eps):
    BODY
    loss = F.cross_entropy(out, y)
    model.zero_grad()
    loss.backward()
    return (x + eps * x.grad.sign()).clamp(0, 1)


torch.manual_seed(0)
model = nn.Sequential(nn.Flatten(), nn.Linear(16, 3))
x = torch.rand(4, 1, 4, 4)
y = torch.randint(0, 3, (4,))
adv = fgsm(model, x, y, 0.1)
"""


@pytest.mark.parametrize("body,bug", [
    ("out = model(x)\n    x.requires_grad = True  # <- cause", True),
    ("x.requires_grad = True\n    out = model(x)", False),
])
def test_flag_set_after_the_forward_explains_grad_none(run_script, body, bug):
    src = FGSM.replace("BODY", body)
    res = run_script(src)
    if not bug:
        assert res.code == 0 and not res.findings, (res.err, res.findings)
        return
    first = res.findings[0]  # both faces name the line: one finding
    assert (first["code"], first["line"]) in {("GT156", marked_line(src)),
                                             ("GT801", marked_line(src))}, res.findings
    assert "static" in first["source"] and "runtime" in first["source"], first
    assert len([f for f in res.findings if f["line"] == marked_line(src)]) == 1


TWO_MODELS = """
import torch
from torch import nn
torch.manual_seed(0)


class Gen(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(4, 4)
        self.head = nn.Linear(4, 4)
        self.aux = nn.Linear(4, 1)

    def forward(self, x):
        h = torch.tanh(self.enc(x))
        return self.head(h), self.aux(h), h


class Disc(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 1)

    def forward(self, h):
        return torch.sigmoid(self.body(torch.relu(h)))


g, d = Gen(), Disc()
opt_g = torch.optim.Adam(g.parameters(), 1e-3)
opt_d = torch.optim.Adam(d.parameters(), 1e-3)
for _ in range(2):
    y, a, h = g(torch.randn(8, 4))
    score = d(HIDDEN)  # <- cause
    loss_d = (score - 1).pow(2).mean()
    opt_d.zero_grad()
    loss_d.backward()
    opt_d.step()
    loss_g = y.pow(2).mean() + a.pow(2).mean() + h.pow(2).mean()
    opt_g.zero_grad()
    loss_g.backward()
    opt_g.step()
"""


@pytest.mark.parametrize("hidden,bug", [("h", True), ("h.detach()", False)])
def test_value_made_inside_a_model_names_the_step_call(tmp_path, hidden, bug):
    """NOTE [module input stamp]: `h` is first given to the generator's own layers, then to
    the discriminator by the loop: the loop's call leads, not the layer inside Disc.forward."""
    import gradtrace

    src = TWO_MODELS.replace("HIDDEN", hidden).lstrip("\n")
    path = tmp_path / "gan.py"
    path.write_text(src, encoding="utf-8")
    if not bug:
        with gradtrace.trace(static=False) as tr:
            runpy.run_path(str(path))
        assert not tr.findings, tr.findings
        return
    with pytest.raises(RuntimeError, match="second time"):
        with gradtrace.trace(static=False) as tr:
            runpy.run_path(str(path))
    assert [(f.code, f.line) for f in tr.diagnosis][:1] == [("GT508", marked_line(src))]


LBFGS_SKIPPED_LAYER = """
import torch
from torch import nn
torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(2, 8)
        self.late = nn.Linear(8, 8)  # used only later in a curriculum: no gradient yet
        self.out = nn.Linear(8, 1)

    def forward(self, x):
        return self.out(torch.tanh(self.body(x)))


class Fit:
    def __init__(self):
        self.net = Net()
        self.x, self.y = torch.rand(16, 2), torch.rand(16, 1)
        self.optimizer = torch.optim.LBFGS(self.net.parameters(), max_iter=6)

    def loss_fn(self):
        CLEAR
        loss = (self.net(self.x) - self.y).pow(2).mean()
        loss.backward()  # <- cause
        return loss

    def train(self):
        self.optimizer.step(self.loss_fn)


Fit().train()
"""


@pytest.mark.parametrize("clear,bug", [("pass", True), ("self.optimizer.zero_grad()", False)])
def test_lbfgs_zero_fill_of_a_gradless_layer_is_no_clearing(tmp_path, clear, bug):
    """NOTE [closure evaluations summed]: LBFGS zero-fills a buffer for the layer without a
    gradient between evaluations; that is no clearing of the closure's gradients, nor a use of
    the layer with grad mode off."""
    import gradtrace

    src = LBFGS_SKIPPED_LAYER.replace("CLEAR", clear).lstrip("\n")
    path = tmp_path / "fit.py"
    path.write_text(src, encoding="utf-8")
    with gradtrace.trace(static=False) as tr:
        runpy.run_path(str(path))
    found = [(f.code, f.line) for f in tr.findings if f.code == "GT891"]
    assert found == ([("GT891", marked_line(src))] if bug else []), tr.findings
    # LBFGS's own `p.new(n)`, `view_as(p)` under its no_grad are no cut of the unused layer
    assert not any("grad mode off" in f.message for f in tr.findings), tr.findings


TOWER = """
import torch
from torch import nn
torch.manual_seed(0)


class Tower(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 2, stride=2)

    DECORATOR
    def forward(self, images):
        return self.conv(images).flatten(1)


model = nn.Sequential(Tower(), nn.Linear(16, 2))
image = torch.rand(1, 3, 4, 4)
noise = torch.zeros_like(image, requires_grad=True)
for _ in range(2):
    loss = model(image + noise).sum()
    loss.backward()
    noise.data = noise.data - 0.1 * noise.grad.detach().sign()
    noise.grad.zero_()
"""


@pytest.mark.parametrize("decorator,bug", [("@torch.no_grad()  # <- cause", True),
                                           ("", False)])
def test_grad_detach_on_none_names_the_cut(tmp_path, decorator, bug):
    """`x.grad.detach()` on None (an attribute the none-assigned pattern also knows): why that
    `.grad` is None, the no_grad decorator of the forward it went through."""
    import gradtrace

    src = TOWER.replace("DECORATOR", decorator).lstrip("\n")
    path = tmp_path / "attack.py"
    path.write_text(src, encoding="utf-8")
    if not bug:
        with gradtrace.trace(static=False) as tr:
            runpy.run_path(str(path))
        assert not tr.findings, tr.findings
        return
    with pytest.raises(AttributeError):
        with gradtrace.trace(static=False) as tr:
            runpy.run_path(str(path))
    assert [(f.code, f.line) for f in tr.diagnosis][:1] == [("GT801", marked_line(src))]


@pytest.mark.parametrize("body,bug", [
    ("out = model(x)\n    x.requires_grad_()  # <- cause", True),
    ("x.requires_grad_()\n    out = model(x)", False),
])
def test_flag_set_after_the_forward_at_run_time_alone(tmp_path, body, bug):
    """NOTE [flag set after the forward]: without the static face, the run names the line that
    made `x` trainable after the forward, not the `.grad` read."""
    import gradtrace

    src = FGSM.replace("BODY", body).lstrip("\n")
    path = tmp_path / "fgsm.py"
    path.write_text(src, encoding="utf-8")
    if not bug:
        with gradtrace.trace(static=False) as tr:
            runpy.run_path(str(path))
        assert not tr.findings, tr.findings
        return
    with pytest.raises(AttributeError):
        with gradtrace.trace(static=False) as tr:
            runpy.run_path(str(path))
    assert [(f.code, f.line) for f in tr.diagnosis][:1] == [("GT801", marked_line(src))]
