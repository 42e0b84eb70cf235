"""`gradtrace run` on correct training scripts never seen before (docs/triage/unseen.md,
session 8): a target network whose output is not detached gets gradients that no optimizer
applies, and the program refreshes it itself (NOTE [copied into]): silent. A module that
nothing ever updates is still reported. Real torch, tiny models, in-process runs."""
from __future__ import annotations

import pytest

HEAD = """
import copy
import torch
import torch.nn as nn
import torch.nn.functional as F

class QNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = nn.Linear(4, 16), nn.Linear(16, 2)

    def forward(self, x):
        return self.l2(torch.relu(self.l1(x)))

g = torch.Generator().manual_seed(0)
def batch():
    return (torch.randn(8, 4, generator=g), torch.randint(0, 2, (8, 1), generator=g),
            torch.randn(8, 1, generator=g), torch.randn(8, 4, generator=g))
"""

LOOKALIKES = {
    # minimalRL's DQN: the TD target runs through the target network with grad on; the
    # target is refreshed from the online network every few updates
    "dqn_target_refreshed_by_load_state_dict": """
online, target = QNet(), QNet()
target.load_state_dict(online.state_dict())
opt = torch.optim.Adam(online.parameters(), lr=1e-3)
for step in range(6):
    s, a, r, s2 = batch()
    q = online(s).gather(1, a)
    y = r + 0.99 * target(s2).max(1)[0].unsqueeze(1)
    loss = F.smooth_l1_loss(q, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 2 == 1:
        target.load_state_dict(online.state_dict())
""",
    # inside a function (only the snapshots taken at steps remain): the target starts as a
    # copy and is refreshed later than this short run goes
    "dqn_target_copied_refreshed_rarely": """
def main():
    online = QNet()
    target = copy.deepcopy(online)
    opt = torch.optim.Adam(online.parameters(), lr=1e-3)
    for step in range(5):
        s, a, r, s2 = batch()
        y = r + 0.99 * target(s2).max(1)[0].unsqueeze(1)
        loss = F.smooth_l1_loss(online(s).gather(1, a), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 1000 == 999:
            target.load_state_dict(online.state_dict())
main()
""",
    # a Polyak-averaged copy written through `.data`
    "polyak_target_copied_through_data": """
critic = QNet()
critic_target = copy.deepcopy(critic)
opt = torch.optim.SGD(critic.parameters(), lr=0.1)
for step in range(4):
    s, a, r, s2 = batch()
    td = r + 0.9 * critic_target(s2).mean(1, keepdim=True)
    loss = (critic(s).mean(1, keepdim=True) - td).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    for p_t, p in zip(critic_target.parameters(), critic.parameters()):
        p_t.data.copy_(0.05 * p.data + 0.95 * p_t.data)
""",
}

BUGS = {
    # a siamese pair built from two towers, the second one left out of the optimizer: it
    # gets gradients and nothing ever changes it; its output is only the target the loss
    # fits the first to, so the static GT438 leads at that run (NOTE [output only a target])
    "second_tower_left_out": ("GT438", """
left, right = QNet(), QNet()
opt = torch.optim.Adam(left.parameters(), lr=1e-3)
for step in range(4):
    s, _, _, s2 = batch()
    loss = F.mse_loss(left(s), right(s2))  # C
    opt.zero_grad()
    loss.backward()
    opt.step()
"""),
    # the target network is never refreshed: it stays at its random initialisation
    # the run's GT821 at the target's line (runtime50) and the static GT438 there too (the
    # target's run, NOTE [output only a target]): one finding, the run's leading
    "dqn_target_never_refreshed": ("GT821", """
online, target = QNet(), QNet()
opt = torch.optim.Adam(online.parameters(), lr=1e-3)
for step in range(4):
    s, a, r, s2 = batch()
    y = r + 0.99 * target(s2).max(1)[0].unsqueeze(1)  # C
    loss = F.smooth_l1_loss(online(s).gather(1, a), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""),
}


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalike_silent(run_script, name):
    res = run_script((HEAD + LOOKALIKES[name]).lstrip("\n"))
    assert res.code == 0 and res.findings == [], res.err


@pytest.mark.parametrize("name", sorted(BUGS))
def test_never_updated_module_reported(run_script, name):
    code, body = BUGS[name]
    src = (HEAD + body).lstrip("\n")
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))
    res = run_script(src)
    assert [(f["code"], f["line"]) for f in res.findings] == [(code, line)], res.err
