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
