"""`gradtrace run` on the facts of held-out batch 30 (docs/triage/ho30.md), each with a buggy twin
named on its line and a silent look-alike, other spellings than the cases'. Real torch,
in-process."""
from __future__ import annotations

CRITIC = """\
import torch
import torch.nn as nn


torch.manual_seed(0)
actor = nn.Linear(4, 2)
critic = nn.Linear(6, 1)
opt = torch.optim.SGD(actor.parameters(), lr=0.1)
for _ in range(3):
    obs = torch.randn(8, 4)
    q = critic(torch.cat([obs, torch.tanh(actor(obs))], dim=1))  # Q
    loss = -q.mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

WRAPPED = """\
import torch
import torch.nn as nn


class Temperature(nn.Module):
    def __init__(self):
        super().__init__()
        self.log_t = torch.zeros(1, requires_grad=True)
        self.opt = torch.optim.Adam(nn.ParameterList([self.log_t]), lr=0.1)  # W

    def update(self, gap):
        loss = (self.log_t * gap).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()


t = Temperature()
for _ in range(3):
    t.update(torch.randn(4))
"""

ONE_BLOCK = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


def g_losses(gen, disc, z, real):
    fake = gen(z)
    rec = F.l1_loss(fake, real)
    with torch.no_grad():  # B
        score = disc(fake)
    adv = F.mse_loss(score, torch.ones_like(score))
    return rec + adv


torch.manual_seed(0)
gen, disc = nn.Linear(4, 4), nn.Linear(4, 1)
opt = torch.optim.SGD(gen.parameters(), lr=0.1)
for _ in range(2):
    loss = g_losses(gen, disc, torch.randn(8, 4), torch.randn(8, 4))
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _line_of(src: str, mark: str) -> int:
    return next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith(mark))


def _run(tmp_path, src: str) -> list:
    import runpy

    import gradtrace

    path = tmp_path / "prog.py"
    path.write_text(src, encoding="utf-8")
    tr = gradtrace.trace()
    with tr:
        runpy.run_path(str(path))
    return list(tr.findings)


def test_critic_the_loss_climbs_is_not_reported(tmp_path):
    # NOTE [maximized module output]: the actor's optimizer is meant not to hold the critic
    found = _run(tmp_path, CRITIC)
    assert [f for f in found if f.code in ("GT821", "GT438")] == [], found


def test_critic_compared_with_a_target_is_reported(tmp_path):
    src = CRITIC.replace("loss = -q.mean()", "loss = (q - 1.0).pow(2).mean()")
    assert src != CRITIC
    found = _run(tmp_path, src)
    assert found and found[0].code in ("GT821", "GT438"), found


def test_leaf_wrapped_for_the_optimizer_leads(tmp_path):
    # the run sees a tensor the optimizer holds that never gets a gradient (GT820 at the wrap,
    # where the optimizer was given it), and the static GT474 on that line confirms why
    # (NOTE [wrapped leaf handed away])
    found = _run(tmp_path, WRAPPED)
    assert found and found[0].line == _line_of(WRAPPED, "# W"), found
    assert found[0].source == "static+runtime" and (found[0].code == "GT474" or any(
        "GT474" in r.message for r in found[0].related)), found


def test_parameter_made_where_the_tensor_is_is_clean(tmp_path):
    src = WRAPPED.replace("self.log_t = torch.zeros(1, requires_grad=True)",
                          "self.log_t = nn.Parameter(torch.zeros(1))").replace(
        "nn.ParameterList([self.log_t])", "self.parameters()")
    assert src != WRAPPED
    found = _run(tmp_path, src)
    assert [f for f in found if f.code in ("GT474", "GT820", "GT821")] == [], found


def test_no_grad_term_through_a_return_is_confirmed(tmp_path):
    # the static GT218 (the block, through the helper's return: NOTE [returned loss
    # backpropagated by the caller]) confirms the run's GT844; the block holds that one
    # statement, so its `with` line is named (NOTE [block of one statement])
    found = _run(tmp_path, ONE_BLOCK)
    assert found and (found[0].code, found[0].line) == ("GT844", _line_of(ONE_BLOCK, "# B"))
    assert found[0].source == "static+runtime" and any(
        "GT218" in r.message for r in found[0].related), found


def test_discriminator_scored_with_grad_is_clean(tmp_path):
    src = ONE_BLOCK.replace("    with torch.no_grad():  # B\n        score = disc(fake)\n",
                            "    score = disc(fake)\n")
    assert src != ONE_BLOCK
    found = _run(tmp_path, src)
    assert [f for f in found if f.code in ("GT218", "GT844")] == [], found
