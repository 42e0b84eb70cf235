"""GT501 in a per-call step method with two optimizers (NOTE [step functions], NOTE [one
optimizer never cleared]): the method clears one model through its module and steps another
optimizer that nothing clears, so that optimizer's gradients add up call after call. The
method being named ``step`` like the optimizers' own ``step()`` does not make it a function
that a clearing function calls. Each snippet runs on real torch."""
from __future__ import annotations

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

SRC = '''
import torch
import torch.nn as nn


class Agent:
    def __init__(self):
        self.actor = nn.Linear(4, 2)
        self.critic = nn.Linear(4, 1)
        self.opt_actor = torch.optim.SGD(self.actor.parameters(), lr=0.1)
        self.opt_critic = torch.optim.SGD(self.critic.parameters(), lr=0.1)

    def {name}(self, s, r):
        {clear_critic}value_loss = (self.critic(s) - r).pow(2).mean()
        value_loss.backward()
        self.opt_critic.step()
        self.actor.zero_grad()
        policy_loss = -self.actor(s).log_softmax(-1)[:, 0].mean()
        policy_loss.backward()
        self.opt_actor.step()


torch.manual_seed(0)
agent = Agent()
s, r = torch.randn(8, 4), torch.randn(8, 1)
norms = []
for _ in range(3):
    agent.{name}(s, r)
    norms.append(agent.critic.weight.grad.norm().item())
result = norms
'''


def _norms(src: str) -> list[float]:
    ns: dict[str, object] = {}
    exec(compile(src, "<snippet>", "exec"), ns)
    return ns["result"]  # type: ignore[return-value]


@pytest.mark.parametrize("name", ["step", "update"])
def test_critic_optimizer_never_cleared_is_reported(name: str) -> None:
    src = SRC.format(name=name, clear_critic="")
    norms = _norms(src)
    assert norms[2] > 1.5 * norms[0]  # one batch again: earlier calls' gradients are still there
    assert ("GT501", 15) in [(f.code, f.line) for f in check_source(src)]


@pytest.mark.parametrize("clear", ["self.critic.zero_grad()", "self.opt_critic.zero_grad()"])
def test_both_cleared_is_silent(clear: str) -> None:
    src = SRC.format(name="step", clear_critic=clear + "\n        ")
    norms = _norms(src)
    assert norms[2] < 1.5 * norms[0]
    assert [f.code for f in check_source(src) if f.code == "GT501"] == []
