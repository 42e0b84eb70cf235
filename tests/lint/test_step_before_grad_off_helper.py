"""GT609 (a loss built after a step from a value before it, NOTE [loss built after the step
from a value before]) and a value returned by a method run with grad off (NOTE [no-grad
helpers]): minChatGPT's PPO trainer builds `experience` in a `@torch.no_grad()` method, steps
the actor, then builds the critic's loss from `experience`: nothing the step changes was saved,
silent. Without the decorator the experience holds the actor's graph and the critic's backward
raises: reported at the step. Both run on real torch."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

TRAINER = """
    from collections import namedtuple

    import torch
    from torch import nn

    Experience = namedtuple("Experience", "log_probs reward")

    class Trainer:
        def __init__(self):
            self.actor = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4))
            self.critic = nn.Linear(4, 1)
            self.actor_optimizer = torch.optim.SGD(self.actor.parameters(), lr=0.1)
            self.critic_optimizer = torch.optim.SGD(self.critic.parameters(), lr=0.1)

        {decorator}
        def make_experience(self, prompt):
            log_probs = torch.log_softmax(self.actor(prompt), -1)
            reward = log_probs.exp().sum(-1, keepdim=True) * 2.0
            return Experience(log_probs, reward)

        def fit(self, prompts):
            for prompt in prompts:
                experience = self.make_experience(prompt)
                actor_loss = -(torch.log_softmax(self.actor(prompt), -1)
                               * experience.log_probs.detach()).mean()
                actor_loss.backward()
                self.actor_optimizer.step()
                self.actor_optimizer.zero_grad()
                new_values = self.critic(prompt)
                critic_loss = ((new_values - experience.reward) ** 2).mean()
                critic_loss.backward()
                self.critic_optimizer.step()
                self.critic_optimizer.zero_grad()


    Trainer().fit([torch.randn(2, 4) for _ in range(2)])
    """
STEP_LINE = 27  # self.actor_optimizer.step()


def source(decorator: str) -> str:
    return textwrap.dedent(TRAINER.format(decorator=decorator)).lstrip("\n")


def gt609(text: str) -> list[int]:
    return [f.line for f in check_source(text, "trainer.py") if f.code == "GT609"]


def test_experience_made_with_grad_off_is_silent_and_trains() -> None:
    text = source("@torch.no_grad()")
    assert gt609(text) == []
    exec(compile(text, "trainer.py", "exec"), {})


def test_experience_with_the_actors_graph_is_reported_at_the_step_and_raises() -> None:
    text = source("")
    assert text.splitlines()[STEP_LINE - 1].strip() == "self.actor_optimizer.step()"
    assert gt609(text) == [STEP_LINE]
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        exec(compile(text, "trainer.py", "exec"), {})


SHARED = """
    import torch
    from torch import nn


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4))

        def cal_loss_cl(self, x):
            out = self.enc(x)
            return out.pow(2).mean(), out

        def cal_loss_ib(self, x, out_old):
            return (self.enc(x) - out_old{cut}).pow(2).mean()


    def train_epoch(model, optimizer, data):
        for x in data:
            loss_cl, out1 = model.cal_loss_cl(x)
            loss_cl.backward()
            optimizer.step()
            optimizer.zero_grad()
            loss_ib = model.cal_loss_ib(x, out1)
            loss_ib.backward()
            optimizer.step()
            optimizer.zero_grad()


    model = Model()
    train_epoch(model, torch.optim.SGD(model.parameters(), lr=0.1), [torch.randn(2, 4)] * 2)
    """


@pytest.mark.parametrize("cut", [".detach()", ""], ids=["read-detached", "read-live"])
def test_value_from_a_backwarded_loss_statement_is_never_this_rules_error(cut: str) -> None:
    """SSLRec's AdaGCL trainer: `out1` comes with `loss_cl`, whose backward before the step
    freed its graph; the next loss reads it detached (trains) or live (torch raises 'backward
    through the graph a second time', not an in-place error): GT609 silent on both."""
    text = textwrap.dedent(SHARED.format(cut=cut)).lstrip("\n")
    assert gt609(text) == []
    if cut:
        exec(compile(text, "trainer.py", "exec"), {})
    else:
        with pytest.raises(RuntimeError, match="a second time"):
            exec(compile(text, "trainer.py", "exec"), {})
