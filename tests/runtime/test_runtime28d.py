"""Session-28 run-time diagnoses, second wave on numerics (docs/triage/runtime28d.md):

- anomaly mode checks for NaN only: a backward that passes on Inf (``sqrt`` at 0) goes through
  and the NaN shows one node later (``0 * inf`` in ``mul``'s backward); the run names the op
  that made the Inf, not the node anomaly mode stopped at (NOTE [Inf before anomaly's NaN]).

- a NaN made in the forward pass reaches the loss but no gradient (``0 * -inf`` of a zero
  probability and a masked log-probability): GT862 at the op that made it
  (NOTE [NaN loss, finite gradients]).

Buggy twins (code + line asserted), look-alikes, and a variant the case does not show.
"""
from __future__ import annotations

import pytest
import torch

from rt_helpers import marked_line

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
"""


@pytest.fixture(autouse=True)
def _anomaly_off():
    """The scripts below turn anomaly mode on globally; the next tests must not run under it."""
    yield
    torch.autograd.set_detect_anomaly(False)


def _first(res):
    found = [f for f in res.findings if f["source"] != "static"]
    assert found, res.err
    return found[0]


# -- an Inf born in sqrt's backward, NaN one node later, under anomaly mode -------------------
INF_TWIN = HEAD + """
torch.autograd.set_detect_anomaly(True)


class Edges(nn.Module):
    def __init__(self):
        super().__init__()
        gx = torch.tensor([[1.0, 0.0, -1.0]] * 3)
        self.register_buffer("kernel", torch.stack([gx, gx.t()]).unsqueeze(1))

    def forward(self, img):
        x = F.conv2d(img, self.kernel)
        x = torch.mul(x, x)
        x = torch.sum(x, dim=1, keepdim=True)
        return torch.sqrt(x)  # <- cause


edges = Edges()
canvas = nn.Parameter(torch.full((1, 1, 16, 16), 0.5))
target = torch.rand(1, 1, 16, 16)
opt = torch.optim.Adam([canvas], lr=0.05)
for step in range(3):
    loss = F.l1_loss(canvas, target) + 0.1 * F.l1_loss(edges(canvas), edges(target))
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

# variant: pow(0.5) of a squared distance, anomaly mode as a context manager, the NaN in
# pow(2)'s backward (2 * 0 * inf) of two identical embeddings
INF_VARIANT = HEAD + """
net = nn.Linear(4, 3)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
a = torch.randn(8, 4)
b = a.clone()
b[4:] += torch.randn(4, 4)
with torch.autograd.detect_anomaly():
    za, zb = net(a), net(b)
    squared = (za - zb).pow(2).sum(-1)
    dist = squared.pow(0.5)  # <- cause
    loss = F.relu(1.0 - dist).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

# look-alike: the eps inside the sqrt, under anomaly mode: nothing to report
INF_EPS_OK = INF_TWIN.replace("torch.sqrt(x)  # <- cause", "torch.sqrt(x + 1e-6)")

# look-alike of the gating: an Inf born in one branch (sqrt at 0 of a leaf: it reaches the
# leaf's .grad as Inf, never NaN), and a 0/0 in another branch that makes NaN from finite
# gradients: anomaly mode's node (the division) is the line, not the sqrt
NAN_FROM_FINITE = HEAD + """
torch.autograd.set_detect_anomaly(True)
z = torch.zeros(3, requires_grad=True)
w = torch.zeros(3, requires_grad=True)
num = w * 2
den = w.abs()
root = torch.sqrt(z).sum()
ratio = torch.div(num, den)  # <- cause
loss = root + ratio.nan_to_num().sum()
loss.backward()
"""


def test_inf_before_anomaly_nan_twin(run_script):
    res = run_script(INF_TWIN)
    f = _first(res)
    assert (f["code"], f["line"]) == ("GT825", marked_line(INF_TWIN)), res.err
    assert "anomaly mode checks for NaN only" in f["message"]
    assert any(r["message"].startswith("the Inf became NaN") for r in f["related"])


def test_inf_before_anomaly_nan_variant(run_script):
    res = run_script(INF_VARIANT)
    f = _first(res)
    assert (f["code"], f["line"]) == ("GT825", marked_line(INF_VARIANT)), res.err


def test_sqrt_with_eps_under_anomaly_is_silent(run_script):
    res = run_script(INF_EPS_OK)
    assert not [f for f in res.findings if f["source"] != "static"], res.err


def test_nan_from_finite_gradients_keeps_anomaly_node(run_script):
    res = run_script(NAN_FROM_FINITE)
    f = _first(res)
    assert (f["code"], f["line"]) == ("GT825", marked_line(NAN_FROM_FINITE)), res.err
    assert "anomaly mode checks for NaN only" not in f["message"]


# -- a NaN loss whose gradients stay finite (GT862) -------------------------------------------
NAN_LOSS_TWIN = HEAD + """
student, teacher = nn.Linear(8, 6), nn.Linear(8, 6)
opt = torch.optim.Adam(student.parameters(), lr=1e-3)
allowed = torch.tensor([True, True, True, True, False, False])
for step in range(3):
    x = torch.randn(16, 8)
    s_logits = student(x).masked_fill(~allowed, float("-inf"))
    with torch.no_grad():
        t_logits = teacher(x).masked_fill(~allowed, float("-inf"))
    log_p_t = F.log_softmax(t_logits, -1)
    log_p_s = F.log_softmax(s_logits, -1)
    kl = (log_p_t.exp() * (log_p_t - log_p_s)).sum(-1).mean()  # <- cause
    opt.zero_grad()
    kl.backward()
    opt.step()
    print(kl.item())
"""

# variant: label smoothing written by hand over a vocabulary whose padded columns are -inf:
# the smoothed target is 0 there and meets the student's -inf log-probability
NAN_LOSS_VARIANT = HEAD + """
class Head(nn.Module):
    def __init__(self, dim=8, vocab=5, padded=8):
        super().__init__()
        self.proj = nn.Linear(dim, vocab)
        self.padded = padded

    def forward(self, h):
        logits = self.proj(h)
        pad = logits.new_full((len(h), self.padded - logits.shape[-1]), float("-inf"))
        return torch.cat([logits, pad], -1)


head = Head()
opt = torch.optim.SGD(head.parameters(), lr=0.1)
labels = torch.randint(0, 5, (12,))
smooth = torch.zeros(12, 8)
smooth[:, :5] = 0.1 / 5
smooth[torch.arange(12), labels] += 0.9
for step in range(2):
    log_probs = F.log_softmax(head(torch.randn(12, 8)), -1)
    nll = -(smooth * log_probs)  # <- cause
    loss = nll.sum(-1).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

# look-alike: the product masked where the probability is 0 (the loss is finite)
NAN_LOSS_MASKED_OK = NAN_LOSS_TWIN.replace(
    "kl = (log_p_t.exp() * (log_p_t - log_p_s)).sum(-1).mean()  # <- cause",
    "p_t = log_p_t.exp()\n"
    "    kl = torch.where(p_t > 0, p_t * (log_p_t - log_p_s), 0.0).sum(-1).mean()")

# look-alike: a NaN loss whose gradients are NaN too is GT825's (std of one value)
NAN_LOSS_NAN_GRADS = HEAD + """
net = nn.Linear(4, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
ret = net(torch.randn(1, 4)).squeeze(-1)
adv = (ret - ret.mean()) / ret.std()  # <- cause
loss = -(adv * ret).mean()
opt.zero_grad()
loss.backward()
opt.step()
"""


def test_nan_loss_with_finite_gradients_twin(run_script):
    res = run_script(NAN_LOSS_TWIN)
    f = _first(res)
    assert (f["code"], f["line"]) == ("GT862", marked_line(NAN_LOSS_TWIN)), res.err


def test_nan_loss_with_finite_gradients_variant(run_script):
    res = run_script(NAN_LOSS_VARIANT)
    f = _first(res)
    assert (f["code"], f["line"]) == ("GT862", marked_line(NAN_LOSS_VARIANT)), res.err


def test_nan_loss_masked_where_is_silent(run_script):
    res = run_script(NAN_LOSS_MASKED_OK)
    assert not [f for f in res.findings if f["source"] != "static"], res.err


def test_nan_loss_with_nan_gradients_stays_gt825(run_script):
    res = run_script(NAN_LOSS_NAN_GRADS)
    codes = [f["code"] for f in res.findings if f["source"] != "static"]
    assert codes[:1] == ["GT825"] and "GT862" not in codes, res.err


# look-alike: the same NaN loss computed once, no optimizer stepping on it (a probe)
NAN_LOSS_NO_STEP = HEAD + """
x = torch.tensor([1.0, 2.0], requires_grad=True)
far = torch.tensor([float("inf"), 0.0], requires_grad=True)
y = torch.where(x > 1.5, x, far)
(y * torch.tensor([0.0, 1.0])).sum().backward()
"""


def test_nan_loss_without_a_step_is_silent(run_script):
    res = run_script(NAN_LOSS_NO_STEP)
    assert not [f for f in res.findings if f["code"] == "GT862"], res.err
