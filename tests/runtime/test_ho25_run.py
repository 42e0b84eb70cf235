"""`gradtrace run` on held-out batch 25's SAC shape (pg-is-all-you-need#30): the actor loss is
built after the critic's step from a critic output computed before it, so its backward raises
'modified by an inplace operation'. The fused run leads with the static GT609 at the first
critic step (NOTE [loss built after the step from a value before]: one finding per backward),
the line the fix moves; with the critic output recomputed after the step it runs clean.
Real torch, in-process runs."""
from __future__ import annotations

SAC = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


def mlp(i, o):
    return nn.Sequential(nn.Linear(i, 16), nn.ReLU(), nn.Linear(16, o))


class Agent:
    def __init__(self):
        self.actor, self.q1, self.q2, self.value = mlp(3, 1), mlp(4, 1), mlp(4, 1), mlp(3, 1)
        self.actor_opt = torch.optim.Adam(self.actor.parameters())
        self.q1_opt = torch.optim.Adam(self.q1.parameters())
        self.q2_opt = torch.optim.Adam(self.q2.parameters())

    def update(self, s, a, y):
        new_a = torch.tanh(self.actor(s))
        q_pred = torch.min(self.q1(torch.cat((s, new_a), -1)), self.q2(torch.cat((s, new_a), -1)))
        q1_loss = F.mse_loss(self.q1(torch.cat((s, a), -1)), y)
        q2_loss = F.mse_loss(self.q2(torch.cat((s, a), -1)), y)
        self.q1_opt.zero_grad()
        q1_loss.backward()
        self.q1_opt.step()  # C
        self.q2_opt.zero_grad()
        q2_loss.backward()
        self.q2_opt.step()
        actor_loss = -(q_pred - self.value(s).detach()).mean()
        self.actor_opt.zero_grad()
        actor_loss.backward()
        self.actor_opt.step()


torch.manual_seed(0)
Agent().update(torch.randn(8, 3), torch.randn(8, 1), torch.randn(8, 1))
"""


def _findings(tmp_path, src: str) -> tuple[list, bool]:
    import runpy

    import gradtrace

    path = tmp_path / "sac.py"
    path.write_text(src, encoding="utf-8")
    tr = gradtrace.trace()
    try:
        with tr:
            runpy.run_path(str(path))
        return list(tr.findings), False
    except Exception as exc:  # noqa: BLE001 - the bug raises
        return list(tr.diagnose(exc)), True


def test_actor_loss_after_critic_step_names_the_first_step(tmp_path):
    line = next(i for i, t in enumerate(SAC.splitlines(), 1) if t.rstrip().endswith("# C"))
    found, crashed = _findings(tmp_path, SAC)
    assert crashed and found
    assert (found[0].code, found[0].line) == ("GT609", line), found


def test_critic_output_recomputed_after_the_steps_runs_clean(tmp_path):
    src = SAC.replace("        actor_loss = -(q_pred - ", "        q_pred = torch.min(self.q1(torch.cat((s, new_a), -1)), "
                      "self.q2(torch.cat((s, new_a), -1)))\n        actor_loss = -(q_pred - ")
    found, crashed = _findings(tmp_path, src)
    assert not crashed
    assert [f for f in found if f.code == "GT609"] == [], found
