"""Static facts of held-out batch 49 (docs/triage/ho55.md). NOTE [value derived from the kept
graph] (GT601): a value computed from the graph a retained backward keeps, read live by a loss
backpropagated after the step. Every snippet runs on real torch: the buggy ones raise
'modified by an inplace operation', the look-alikes run."""
from __future__ import annotations

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

SRC = '''
import torch
import torch.nn as nn


def discounted(rewards, values, gamma=0.9):
    out = torch.zeros_like(values)
    run = values[-1]
    for t in range(values.shape[0] - 1, -1, -1):
        run = rewards[t] + gamma * run
        out[t] = run
    return out


def update(policy, critic, popt, copt, obs):
    acts = torch.tanh(policy(obs))
    vals = critic(torch.cat([obs, acts], 1))
    rets = discounted(torch.ones_like(vals), vals)
    closs = (vals - rets.detach()).pow(2).mean()
    copt.zero_grad()
    closs.backward(retain_graph=True)
    {middle}
    ploss = -rets.mean()
    popt.zero_grad()
    ploss.backward()
    popt.step()
    {after}


torch.manual_seed(0)
policy = nn.Linear(3, 2)
critic = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 1))
popt = torch.optim.SGD(policy.parameters(), lr=0.1)
copt = torch.optim.SGD(critic.parameters(), lr=0.1)
update(policy, critic, popt, copt, torch.randn(6, 3))
'''

BUGGY = SRC.format(middle="copt.step()  # STEP", after="")
# the critic steps after the policy's backward (the fix)
LATE_STEP = SRC.format(middle="pass", after="copt.step()")
# the returns read after the step are recomputed from the stepped critic (a new graph)
RECOMPUTED = SRC.replace("    ploss = -rets.mean()\n", "    ploss = -critic(torch.cat([obs, "
                         "torch.tanh(policy(obs))], 1)).mean()\n").format(
                             middle="copt.step()", after="")


def _line(src: str, mark: str) -> int:
    return next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith(mark))


def _runs(src: str) -> bool:
    try:
        exec(compile(src, "<snippet>", "exec"), {"__name__": "snippet"})
    except RuntimeError as e:
        assert "inplace operation" in str(e)
        return False
    return True


def test_value_derived_from_kept_graph_names_the_step():
    assert not _runs(BUGGY)
    found = [(f.code, f.line) for f in check_source(BUGGY, "u.py")]
    assert ("GT601", _line(BUGGY, "# STEP")) in found, found


@pytest.mark.parametrize("src", [LATE_STEP, RECOMPUTED])
def test_value_derived_from_kept_graph_look_alikes_are_silent(src):
    assert _runs(src)
    found = [(f.code, f.line) for f in check_source(src, "u.py")]
    assert not [c for c in found if c[0] in ("GT601", "GT609")], found
