"""Session-28 run-time diagnoses of silent bugs (docs/triage/runtime28a.md):

- a NaN made under ``no_grad`` (a target, from finite inputs) reaches a later optimizer's loss,
  not the first backward()'s: the forward op that made it is named
  (NOTE [NaN made under no_grad]).

Buggy twins (code + line asserted), silent look-alikes, and a variant each case does not show.
"""
from __future__ import annotations

from rt_helpers import marked_line

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
"""


def _run_finding(res):
    found = [f for f in res.findings if f["source"] != "static"]
    assert found, res.err
    return found[0]


def _run_line(f):
    """The line the run itself named (fused: its "confirmed at run time" entry)."""
    return next((r["line"] for r in f["related"] if r["message"].startswith("confirmed at run")),
                f["line"])


def _check(run_script, src, code):
    res = run_script(src)
    f = _run_finding(res)
    assert (f["code"], _run_line(f)) == (code, marked_line(src)), res.err


# -- a NaN made under no_grad, met by a later optimizer's loss --------------------------------
NOGRAD_NAN_TWIN = HEAD + """
class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 4)
        self.scale = 2.0

    def forward(self, s):
        out = self.net(s)
        raw = out[:, :2] + out[:, 2:].exp() * torch.randn(len(s), 2)
        action = torch.tanh(raw) * self.scale
        log_prob = -raw.pow(2) - torch.log(1 - action.pow(2) + 1e-6)  # <- cause
        return action, log_prob.sum(1)


policy, q, v = Policy(), nn.Linear(6, 1), nn.Linear(4, 1)
q_opt = torch.optim.Adam(q.parameters(), lr=1e-3)
v_opt = torch.optim.Adam(v.parameters(), lr=1e-3)
states, actions, rewards = torch.randn(32, 4), torch.rand(32, 2) * 4 - 2, torch.randn(32, 1)
with torch.no_grad():
    a, logp = policy(states)
    q_target = rewards + 0.99 * v(states)
    v_target = q(torch.cat([states, a], 1)) - 0.1 * logp.unsqueeze(1)
q_opt.zero_grad()
F.mse_loss(q(torch.cat([states, actions], 1)), q_target).backward()
q_opt.step()
v_opt.zero_grad()
F.mse_loss(v(states), v_target).backward()
v_opt.step()
"""

# a variant the case does not show: returns standardised under no_grad over one episode of
# length 1 (std of a single value is NaN), the critic trained first on a finite target
NOGRAD_NAN_VARIANT = HEAD + """
critic, actor = nn.Linear(3, 1), nn.Linear(3, 2)
c_opt = torch.optim.SGD(critic.parameters(), lr=0.1)
a_opt = torch.optim.SGD(actor.parameters(), lr=0.1)
obs = torch.randn(1, 3)
with torch.no_grad():
    ret = torch.randn(1) + critic(obs).squeeze(1)
    adv = (ret - ret.mean()) / ret.std()  # <- cause
c_opt.zero_grad()
F.mse_loss(critic(obs).squeeze(1), ret).backward()
c_opt.step()
a_opt.zero_grad()
(-(F.log_softmax(actor(obs), 1)[:, 0] * adv)).mean().backward()
a_opt.step()
"""


def test_nan_made_under_no_grad_met_by_a_later_loss(run_script):
    _check(run_script, NOGRAD_NAN_TWIN, "GT825")


def test_nan_made_under_no_grad_variant_std_of_one_value(run_script):
    _check(run_script, NOGRAD_NAN_VARIANT, "GT825")


# look-alike: a NaN made under no_grad only logged; every loss finite
NOGRAD_NAN_LOGGED = HEAD + """
model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(16, 3), torch.randn(16, 1)
for _ in range(3):
    with torch.no_grad():
        spread = torch.log(model(x) - 100.0).mean()
    opt.zero_grad()
    F.mse_loss(model(x), y).backward()
    opt.step()
print(spread.item())
"""


def test_nan_made_under_no_grad_only_logged_is_silent(run_script):
    res = run_script(NOGRAD_NAN_LOGGED)
    assert res.code == 0, res.err
    assert [f for f in res.findings if f["source"] != "static" and f["code"] == "GT825"] == []


# look-alike: a NaN made under no_grad that training never uses, and much later (after the
# first 8 backward()s) a NaN of another cause reaches a step: the no-grad line is not named
NOGRAD_NAN_LATE = HEAD + """
model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(16, 3), torch.randn(16, 1)
with torch.no_grad():
    probe = torch.sqrt(model(x) - 100.0)
for i in range(12):
    xi = x if i < 10 else x * float("inf")
    opt.zero_grad()
    F.mse_loss(model(xi), y).backward()
    opt.step()
"""


def test_nan_made_under_no_grad_then_a_late_nan_of_another_cause(run_script):
    res = run_script(NOGRAD_NAN_LATE)
    lines = [f["line"] for f in res.findings if f["source"] != "static" and f["code"] == "GT825"]
    assert marked_line(NOGRAD_NAN_LATE, "probe = ") not in lines, res.err


# -- one no_grad block run for a frozen copy and for the trained model -------------------------
# FACIL's GradCAM: the same helper (its no_grad block) maps the old model and the new one
SHARED_BLOCK_TWIN = HEAD + """
import copy


def attention(model, x):
    feats = model[0](x)
    out = model[1](feats)
    with torch.no_grad():  # <- cause
        att = feats.pow(2).mean(dim=1)
    return att, out


model = nn.Sequential(nn.Linear(6, 8), nn.Linear(8, 3))
old = copy.deepcopy(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(16, 6), torch.randint(0, 3, (16,))
for _ in range(3):
    att_old, _ = attention(old, x)
    att, out = attention(model, x)
    loss = F.cross_entropy(out, y) + (att - att_old).abs().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

# avalanche's LwF: one block holds the previous model's forward (right) and the current
# model's (the bug): the current model's statement is named
SHARED_BLOCK_STATEMENT = HEAD + """
import copy


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(6, 8), nn.Linear(8, 3)

    def forward(self, x):
        return self.b(F.relu(self.a(x)))


model = Net()
opt = torch.optim.Adam(model.parameters(), lr=0.01)
x, y = torch.randn(16, 6), torch.randint(0, 3, (16,))
prev = None
for step in range(6):
    out = model(x)
    loss = F.cross_entropy(out, y)
    if prev is not None:
        with torch.no_grad():
            y_prev = prev(x)
            y_curr = model(x)  # <- cause
        loss = loss + F.kl_div(F.log_softmax(y_curr, 1), F.softmax(y_prev, 1), reduction="batchmean")
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step == 2:
        prev = copy.deepcopy(model)
"""

# a variant the cases do not show: the trained model runs first through the shared block (its
# switch a set_grad_enabled(False)), the features of both compared in a hint loss
SHARED_BLOCK_STUDENT_FIRST = HEAD + """
def pooled(net, x):
    h = net(x)
    with torch.set_grad_enabled(False):  # <- cause
        p = F.normalize(h, dim=1).mean(dim=0)
    return p


student, teacher = nn.Linear(5, 4), nn.Linear(5, 4)
head = nn.Linear(4, 2)
opt = torch.optim.SGD(list(student.parameters()) + list(head.parameters()), lr=0.1)
x, y = torch.randn(32, 5), torch.randint(0, 2, (32,))
for _ in range(3):
    feats = [pooled(net, x) for net in (student, teacher)]
    hint = (feats[0] - feats[1]).pow(2).sum()
    loss = F.cross_entropy(head(student(x)), y) + hint
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_no_grad_block_shared_by_frozen_copy_and_trained_model(run_script):
    _check(run_script, SHARED_BLOCK_TWIN, "GT844")


def test_no_grad_block_statement_of_the_trained_model(run_script):
    _check(run_script, SHARED_BLOCK_STATEMENT, "GT844")


def test_no_grad_block_shared_trained_model_first(run_script):
    _check(run_script, SHARED_BLOCK_STUDENT_FIRST, "GT844")


# look-alike: the shared helper's map of the trained model only logged, never in the loss
SHARED_BLOCK_LOGGED = SHARED_BLOCK_TWIN.replace(
    "loss = F.cross_entropy(out, y) + (att - att_old).abs().mean()",
    "loss = F.cross_entropy(out, y)\n    gap = (att - att_old).abs().mean().item()")

# look-alike: the block runs only the frozen copy; the trained model's term keeps its graph
SHARED_BLOCK_TEACHER_ONLY = HEAD + """
import copy

model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
opt = torch.optim.Adam(model.parameters(), lr=0.01)
x, y = torch.randn(16, 6), torch.randint(0, 3, (16,))
prev = None
for step in range(6):
    out = model(x)
    loss = F.cross_entropy(out, y)
    if prev is not None:
        with torch.no_grad():
            y_prev = prev(x)
        loss = loss + F.kl_div(F.log_softmax(out, 1), F.softmax(y_prev, 1), reduction="batchmean")
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step == 2:
        prev = copy.deepcopy(model)
"""


def test_shared_no_grad_block_only_logged_is_silent(run_script):
    res = run_script(SHARED_BLOCK_LOGGED)
    assert res.code == 0, res.err
    assert [f for f in res.findings if f["source"] != "static" and f["code"] == "GT844"] == []


def test_no_grad_block_for_the_frozen_copy_only_is_silent(run_script):
    res = run_script(SHARED_BLOCK_TEACHER_ONLY)
    assert res.code == 0, res.err
    assert [f for f in res.findings if f["source"] != "static"] == [], res.err
