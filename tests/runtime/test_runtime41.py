"""runtime41 on real torch, one process, a few steps, tiny models.

NOTE [cleared gradients already used by a step] (GT827): with several optimizers, a
``zero_grad()`` that runs after another loss's backward() but clears only gradients its own
optimizer's last step already applied (and no backward() wrote since) loses nothing: TextBox's
LeakGAN zeroes and backpropagates the manager's and the worker's losses in turn and steps both
optimizers at the end; an actor-critic update written the same way. The buggy twin in other
words: the first loss also reaches a shared encoder that the second optimizer holds, so the
second ``zero_grad()`` throws the first loss's encoder gradient away before any step: still
reported (named at the steps, which run outside the loop where the gradients are cleared: the
existing wording of NOTE [discarded gradients])."""
from __future__ import annotations

import pytest

from tests.runtime.rt_helpers import marked_line

torch = pytest.importorskip("torch")

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
"""

# two optimizers, each zero_grad() right before its own loss's backward(), both steps at the end
TWO_LOSSES = """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.shared = nn.Linear(4, 8)
        self.first = nn.Linear(8, 1)
        self.second = nn.Linear(8, 1)

    def losses(self, x):
        h = torch.tanh(self.shared(x))
        return self.first(SOURCE).pow(2).mean(), self.second(h).pow(2).mean()

net = Net()
opts = (torch.optim.Adam(net.first.parameters(), lr=1e-2),
        torch.optim.Adam(list(net.shared.parameters()) + list(net.second.parameters()), lr=1e-2))

def update(losses):
    for i, (o, loss) in enumerate(zip(opts, losses)):
        o.zero_grad()
        loss.backward(retain_graph=i == 0)
    for o in opts:
        o.step()  # <- cause

for _ in range(4):
    update(net.losses(torch.randn(6, 4)))
"""

ACTOR_CRITIC = """
actor, critic = nn.Linear(3, 2), nn.Linear(3, 1)
actor_opt = torch.optim.SGD(actor.parameters(), lr=1e-2)
critic_opt = torch.optim.SGD(critic.parameters(), lr=1e-2)
for _ in range(4):
    s = torch.randn(8, 3)
    value = critic(s)
    advantage = (torch.randn(8, 1) - value).detach()
    actor_loss = -(F.log_softmax(actor(s), -1)[:, 0:1] * advantage).mean()
    critic_loss = value.pow(2).mean()
    actor_opt.zero_grad()
    actor_loss.backward()
    critic_opt.zero_grad()
    critic_loss.backward()
    actor_opt.step()
    critic_opt.step()
"""


def test_shared_encoder_gradient_cleared_by_second_optimizer_named(run_script):
    src = HEAD + TWO_LOSSES.replace("SOURCE", "h")  # the first loss reaches `shared` too
    res = run_script(src)
    assert res.code == 0, res.err
    assert [(f["code"], f["line"]) for f in res.findings][:1] == [("GT827", marked_line(src))], \
        res.findings


@pytest.mark.parametrize("src", [TWO_LOSSES.replace("SOURCE", "h.detach()"), ACTOR_CRITIC],
                         ids=["leakgan_like", "actor_critic"])
def test_gradients_already_stepped_cleared_silent(run_script, src):
    res = run_script(HEAD + src)
    assert res.code == 0, res.err
    assert "GT827" not in res.codes(), res.findings


def test_lazy_modules_two_optimizers_under_trace():
    """The `.grad` setter now reads the old gradient: an UninitializedParameter's setter and
    two lazy modules stepped by two optimizers run unchanged and stay silent."""
    import torch.nn as nn

    import gradtrace

    torch.manual_seed(0)
    with gradtrace.trace() as tr:
        a, b = nn.LazyLinear(3), nn.LazyLinear(1)
        a.weight.grad = None  # an UninitializedParameter
        oa = torch.optim.SGD(a.parameters(), lr=0.1)
        ob = torch.optim.SGD(b.parameters(), lr=0.1)
        for _ in range(3):
            x = torch.randn(4, 5)
            la, lb = a(x).pow(2).mean(), b(x).pow(2).mean()
            oa.zero_grad()
            la.backward()
            ob.zero_grad()
            lb.backward()
            oa.step()
            ob.step()
    assert a.weight.shape == (3, 5) and b.weight.grad is not None
    assert not tr.findings, [f.message for f in tr.findings]


def test_inference_tensor_gradient_kept_by_two_optimizers(monkeypatch):
    """A gradient made under inference_mode (no version counter) that a step applies: the
    applied-gradient record skips it; in strict mode (our errors raise) the run ends clean."""
    import torch.nn as nn

    import gradtrace

    monkeypatch.setenv("GRADTRACE_STRICT", "1")
    torch.manual_seed(0)
    with gradtrace.trace():
        a, b = nn.Linear(5, 3), nn.Linear(5, 1)
        oa = torch.optim.SGD(a.parameters(), lr=0.1)
        ob = torch.optim.SGD(b.parameters(), lr=0.1)
        for _ in range(3):
            x = torch.randn(4, 5)
            oa.zero_grad()
            a(x).pow(2).mean().backward()
            with torch.inference_mode():
                ob.zero_grad()
                b.weight.grad = torch.ones(1, 5)
            oa.step()
            ob.step()
    assert torch.allclose(b.weight.grad, torch.ones(1, 5))
