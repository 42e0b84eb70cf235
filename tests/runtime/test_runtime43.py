"""runtime43 on real torch, one process, a few steps, tiny models.

- NOTE [derivative through a no_grad copy of its input] (GT896): forces as
  ``-autograd.grad(energy, pos)`` where part of the energy is built from values computed from
  ``pos`` inside ``with torch.no_grad():`` (matgl's CHGNet line graph): named at the ``with``.
  Silent: the values computed outside the block, only an index built under no_grad, a
  stop-gradient target computed under no_grad from trained weights (autograd.grad over
  parameters), a ``.detach()`` written on purpose.
- NOTE [term detached from the model it should train] (GT821): a term summed into the
  generator's loss is computed by an auxiliary net no optimizer holds on ``fake.detach()``
  (joliGEN's semantic loss): named at the detach. Silent there: the term on the live output;
  a discriminator step of its own on ``fake.detach()`` (its GT821 stays at its own line).
- NOTE [random weight kept as a buffer] (GT897): a prior drawn by ``nn.init.xavier_uniform_``
  and registered as a buffer beside trained layers (Slot Attention's ``slots_mu``): named at
  the registration. Silent: the same as a Parameter, a codebook buffer refreshed in place, a
  buffer loaded from a state dict, a buffer made by ``torch.randn`` (a fixed table).
- NOTE [reward weight not detached] (GT898): REINFORCE weighs a Categorical's log-probabilities
  by a reward computed with a graph from a regression head (visdial-rl): named at the product.
  Silent: the reward detached, an entropy bonus ``p * log p`` of the same logits, a soft target
  (GT878's), a constant weight.
- NOTE [optimizer state holding the gradient] (GT860): a hand-written optimizer stores
  ``state['prev'] = grad`` (``p.grad.data``) and the loop zeroes gradients in place (DiffGrad):
  named at the assignment in ``step``. Silent: a copy stored, gradients set to None between
  steps.
"""
from __future__ import annotations

import pytest

from tests.runtime.rt_helpers import marked_line

torch = pytest.importorskip("torch")

FORCES = """
import torch
import torch.nn as nn
torch.manual_seed(0)
mlp = nn.Sequential(nn.Linear(1, 8), nn.SiLU(), nn.Linear(8, 1))
ang = nn.Linear(1, 1)
pos = torch.randn(5, 3, requires_grad=True)
src, dst = torch.tensor([0, 1, 2, 3]), torch.tensor([1, 2, 3, 4])
first = torch.tensor([0, 1, 2])
bond = pos[dst] - pos[src]
BLOCK
energy = mlp(bond.norm(dim=1, keepdim=True)).sum() + ang(cos[:, None]).sum()
forces = -torch.autograd.grad(energy, pos)[0]
print(forces.shape)
"""

CUT = """with torch.no_grad():  # <- cause
    pair = bond[first]
cos = (pair * bond[1:]).sum(1)"""
LIVE = """pair = bond[first]
cos = (pair * bond[1:]).sum(1)"""
INDEX = """with torch.no_grad():
    ids = (bond.norm(dim=1) < 9.0).nonzero().squeeze(1)[:3]
cos = (bond[ids] * bond[1:]).sum(1)"""
DETACH = """cos = (bond[first].detach() * bond[1:]).sum(1)"""

TARGET = """
import torch
import torch.nn as nn
torch.manual_seed(0)
net = nn.Linear(4, 2)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    s, s2 = torch.randn(6, 4), torch.randn(6, 4)
    with torch.no_grad():
        target = 1.0 + 0.9 * net(s2).max(1).values
    loss = (net(s).max(1).values - target).pow(2).mean()
    grads = torch.autograd.grad(loss, list(net.parameters()))
    for p, g in zip(net.parameters(), grads):
        p.grad = g
    opt.step()
"""


def test_derivative_through_no_grad_values_named_at_the_block(run_script):
    src = FORCES.replace("BLOCK", CUT)
    res = run_script(src)
    assert res.code == 0, res.err
    assert [(f["code"], f["line"]) for f in res.findings][:1] == [("GT896", marked_line(src))], \
        res.findings


@pytest.mark.parametrize("src", [FORCES.replace("BLOCK", LIVE), FORCES.replace("BLOCK", INDEX),
                                 FORCES.replace("BLOCK", DETACH), TARGET],
                         ids=["computed_with_grad", "index_under_no_grad", "detach_on_purpose",
                              "stop_gradient_target_over_parameters"])
def test_derivative_look_alikes_silent(run_script, src):
    res = run_script(src)
    assert res.code == 0, res.err
    assert "GT896" not in res.codes(), res.findings


GAN = """
import torch
import torch.nn as nn
torch.manual_seed(0)
G = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
D = nn.Linear(4, 1)
aux = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
opt_G = torch.optim.Adam(G.parameters(), lr=1e-3)
for _ in range(3):
    fake, y = G(torch.randn(6, 4)), torch.randint(0, 3, (6,))
    LOSS
    opt_G.zero_grad()
    loss.backward()
    opt_G.step()
"""
DEAD_TERM = """sem = nn.functional.cross_entropy(aux(fake.detach()), y)  # <- cause
    loss = (D(fake) - 1).pow(2).mean() + sem"""
LIVE_TERM = """sem = nn.functional.cross_entropy(aux(fake), y)
    loss = (D(fake) - 1).pow(2).mean() + sem"""
D_STEP = """loss = (D(fake) - 1).pow(2).mean()
    loss_D = aux(fake.detach()).pow(2).mean()
    loss_D.backward()"""


def test_term_detached_from_trained_model_named_at_the_detach(run_script):
    src = GAN.replace("LOSS", DEAD_TERM)
    res = run_script(src)
    assert res.code == 0, res.err
    assert [(f["code"], f["line"]) for f in res.findings][:1] == [("GT821", marked_line(src))], \
        res.findings


@pytest.mark.parametrize("body", [LIVE_TERM, D_STEP], ids=["live_term", "own_step_on_detached"])
def test_detached_term_look_alikes_not_named_at_the_detach(run_script, body):
    src = GAN.replace("LOSS", body)
    res = run_script(src)
    assert res.code == 0, res.err
    detach_line = next(i for i, line in enumerate(src.lstrip("\n").splitlines(), 1)
                       if "fake" in line and ("aux(" in line))
    assert ("GT821", detach_line) not in [(f["code"], f["line"]) for f in res.findings], \
        res.findings


SLOTS = """
import torch
import torch.nn as nn
torch.manual_seed(0)

class Slots(nn.Module):
    def __init__(self, d=6):
        super().__init__()
        self.proj = nn.Linear(d, d)
        PRIOR

    def forward(self, x):
        return self.proj(x + self.mu)

model = Slots()
LOAD
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for _ in range(3):
    loss = model(torch.randn(4, 6)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    REFRESH
"""
BUFFER = 'self.register_buffer("mu", nn.init.xavier_uniform_(torch.zeros(1, d)))  # <- cause'


def _slots(prior=BUFFER, load="", refresh=""):
    return SLOTS.replace("PRIOR", prior).replace("LOAD", load).replace("REFRESH", refresh)


def test_random_weight_registered_as_buffer_named_at_registration(run_script):
    src = _slots()
    res = run_script(src)
    assert res.code == 0, res.err
    assert [(f["code"], f["line"]) for f in res.findings][:1] == [("GT897", marked_line(src))], \
        res.findings


@pytest.mark.parametrize("src", [
    _slots('self.mu = nn.Parameter(nn.init.xavier_uniform_(torch.zeros(1, d)))'),
    _slots(refresh="with torch.no_grad():\n        model.mu.mul_(0.9).add_(0.1)"),
    _slots(load='model.load_state_dict({k: v + 1 for k, v in model.state_dict().items()})'),
    _slots('self.register_buffer("mu", torch.randn(1, d))'),
], ids=["parameter", "refreshed_in_place", "loaded", "factory_table"])
def test_random_buffer_look_alikes_silent(run_script, src):
    res = run_script(src)
    assert res.code == 0, res.err
    assert "GT897" not in res.codes(), res.findings


def test_lazy_module_and_uninitialized_parameter_beside_random_buffer_under_trace(monkeypatch):
    """A lazy layer next to a random buffer, and a lazy module never run (its
    UninitializedParameter and UninitializedBuffer stay): under trace() in strict mode (our
    errors raise) the run ends clean. (trace() arms its mode on sampled steps: the fill made
    before them is not seen, so nothing is named here; `gradtrace run` sees it, below.)"""
    import torch.nn as nn

    import gradtrace

    monkeypatch.setenv("GRADTRACE_STRICT", "1")
    torch.manual_seed(0)
    with gradtrace.trace() as tr:
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.LazyLinear(3)
                self.idle = nn.LazyBatchNorm1d()
                self.register_buffer("mu", nn.init.normal_(torch.zeros(1, 3)))

            def forward(self, x):
                return self.lin(x) + self.mu

        model = M()
        model(torch.randn(2, 4))
        opt = torch.optim.SGD(model.lin.parameters(), lr=0.1)
        for _ in range(3):
            loss = model(torch.randn(5, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert model.lin.weight.shape == (3, 4)
    assert "GT897" not in [f.code for f in tr.findings], [f.message for f in tr.findings]


def test_random_buffer_beside_lazy_layer_named(run_script):
    src = _slots(load="model(torch.randn(2, 6))").replace("nn.Linear(d, d)", "nn.LazyLinear(d)")
    res = run_script(src)
    assert res.code == 0, res.err
    assert [(f["code"], f["line"]) for f in res.findings][:1] == [("GT897", marked_line(src))], \
        res.findings


REINFORCE = """
import torch
import torch.nn as nn
from torch.distributions import Categorical
torch.manual_seed(0)
policy = nn.Linear(4, 3)
regress = nn.Linear(4, 2)
teacher = nn.Linear(4, 3)
opt = torch.optim.Adam([*policy.parameters(), *regress.parameters()], lr=1e-2)
for _ in range(3):
    s = torch.randn(6, 4)
    dist = Categorical(logits=policy(s))
    a = dist.sample()
    feat = (regress(s) - 1).pow(2).mean(1)
    reward = -feat
    LOSS
    opt.zero_grad()
    (loss + feat.mean()).backward()
    opt.step()
"""
PG = "loss = -(dist.log_prob(a) * reward).mean()  # <- cause"


def test_reward_weight_not_detached_named_at_the_product(run_script):
    src = REINFORCE.replace("LOSS", PG)
    res = run_script(src)
    assert res.code == 0, res.err
    assert [(f["code"], f["line"]) for f in res.findings][:1] == [("GT898", marked_line(src))], \
        res.findings


@pytest.mark.parametrize("loss", [
    "loss = -(dist.log_prob(a) * reward.detach()).mean()",
    "loss = -(dist.log_prob(a) * reward.detach()).mean()"
    " - 0.01 * (dist.probs * dist.logits).sum(-1).mean()",
    "loss = -(torch.softmax(teacher(s), -1) * torch.log_softmax(policy(s), -1)).sum(-1).mean()",
    "loss = -(dist.log_prob(a) * 0.5).mean()",
], ids=["detached", "entropy_bonus", "soft_target", "constant"])
def test_reward_weight_look_alikes_silent(run_script, loss):
    res = run_script(REINFORCE.replace("LOSS", loss))
    assert res.code == 0, res.err
    assert "GT898" not in res.codes(), res.findings


DIFF = """
import torch
import torch.nn as nn
torch.manual_seed(0)

class Diff(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad.data
                state = self.state[p]
                prev = state.get("prev", torch.zeros_like(p))
                p.add_(grad + (grad - prev).abs(), alpha=-group["lr"])
                STORE

model = nn.Linear(4, 2)
opt = Diff(model.parameters())
for _ in range(4):
    loss = model(torch.randn(5, 4)).pow(2).mean()
    opt.zero_grad(set_to_none=NONE)
    loss.backward()
    opt.step()
"""


def test_state_holding_the_gradient_named_at_the_assignment(run_script):
    src = DIFF.replace("STORE", 'state["prev"] = grad  # <- cause').replace("NONE", "False")
    res = run_script(src)
    assert res.code == 0, res.err
    assert [(f["code"], f["line"]) for f in res.findings][:1] == [("GT860", marked_line(src))], \
        res.findings


@pytest.mark.parametrize("store,none", [('state["prev"] = grad.clone()', "False"),
                                        ('state["prev"] = grad', "True")],
                         ids=["copy_stored", "set_to_none"])
def test_state_holding_the_gradient_look_alikes_silent(run_script, store, none):
    res = run_script(DIFF.replace("STORE", store).replace("NONE", none))
    assert res.code == 0, res.err
    assert "GT860" not in res.codes(), res.findings
