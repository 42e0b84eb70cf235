"""`gradtrace run` on the facts of held-out batch 49 (docs/triage/ho55.md), each with a buggy twin
and a silent look-alike, other spellings than the cases'. Real torch, in-process."""
from __future__ import annotations

import pytest

# NOTE [model the climbed objective runs through]: a planner pushes its actions through a fixed
# dynamics model and a reward model nobody trains here; the loss is the negated return.
PLANNER = """\
import torch
from torch import nn


def imagine(policy, dynamics, reward, s, steps=3):
    total = 0.0
    for _ in range(steps):
        a = policy(s)
        s = dynamics(torch.cat([s, a], -1))
        total = total + reward(s)
    return total


torch.manual_seed(0)
policy = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))
dynamics = nn.Sequential(nn.Linear(5, 8), nn.ELU(), nn.Linear(8, 3))
reward = nn.Linear(3, 1)
pi_opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
for it in range(3):
    start = torch.randn(16, 3)
    objective = -1 * imagine(policy, dynamics, reward, start).mean()  # OBJ
    pi_opt.zero_grad()
    objective.backward()
    pi_opt.step()
"""

# buggy twin: a context encoder before the policy, left out of its optimizer (fed only data:
# forgotten, not crossed)
FORGOTTEN = PLANNER.replace(
    "reward = nn.Linear(3, 1)\n",
    "reward = nn.Linear(3, 1)\nctx = nn.Linear(3, 3)\n").replace(
    "start = torch.randn(16, 3)", "start = ctx(torch.randn(16, 3))")

# buggy twin: the reward model has its own regression loss, and no optimizer holds it
REGRESSED = PLANNER.replace(
    "    pi_opt.step()\n",
    "    pi_opt.step()\n    fit = (reward(start) - 1.0).pow(2).mean()\n    fit.backward()\n")

# buggy twin: the loss is not a whole negation (part of it is compared with a target)
PARTIAL = PLANNER.replace(
    "objective = -1 * imagine(policy, dynamics, reward, start).mean()",
    "objective = (imagine(policy, dynamics, reward, start) - 2.0).pow(2).mean()")

# buggy twin: a negated log-likelihood (fitted to labels), its classifier head forgotten
LIKELIHOOD = """\
import torch
from torch import nn
from torch.distributions import Categorical

torch.manual_seed(0)
body = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
head = nn.Linear(8, 3)
opt = torch.optim.SGD(body.parameters(), lr=0.1)
for step in range(3):
    x, y = torch.randn(10, 4), torch.randint(0, 3, (10,))
    nll = -Categorical(logits=head(body(x))).log_prob(y).mean()
    opt.zero_grad()
    nll.backward()
    opt.step()
"""


def _run(tmp_path, src: str) -> list:
    import runpy

    import gradtrace

    path = tmp_path / "prog.py"
    path.write_text(src, encoding="utf-8")
    tr = gradtrace.trace()
    with tr:
        runpy.run_path(str(path))
    return list(tr.findings)


def _names(found) -> str:
    return " ".join(f.message for f in found if f.code == "GT821")


def test_models_the_negated_objective_runs_through_are_not_reported(tmp_path):
    # (the static GT438 still names `dynamics` through the helper: left, docs/triage/ho55.md)
    found = _run(tmp_path, PLANNER)
    assert [f for f in found if f.code == "GT821" or "runtime" in f.source] == [], found


@pytest.mark.parametrize("src, name", [(FORGOTTEN, "Linear.weight"), (REGRESSED, "Linear.weight"),
                                       (PARTIAL, "Sequential.0.weight"),
                                       (LIKELIHOOD, "Linear.weight")])
def test_models_left_out_otherwise_are_reported(tmp_path, src, name):
    assert src != PLANNER
    found = _run(tmp_path, src)
    assert name in _names(found), found


@pytest.mark.parametrize("text, negated", [
    ("loss = -q.mean()\nloss.backward()", True),
    ("loss = -1 * (v.mean())\nloss.backward()", True),
    ("loss = (x * -0.5).sum()\nloss.backward()", True),
    ("(-r).mean().backward()", True),
    ("loss = a - q\nloss.backward()", False),
    ("loss = -q.mean()\nloss = loss + reg\nloss.backward()", False),
    ("loss = -1 * -q\nloss.backward()", False),
])
def test_negated_loss(text, negated):
    import ast

    from gradtrace.runtime.trace.climbed_feed import negated_loss

    tree = ast.parse(text)
    assert negated_loss(tree, len(text.splitlines())) is negated
