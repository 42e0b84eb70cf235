"""The lead's fixes of session 24.

GT415 with a parameter built in several branches: `__init__` builds `self.p` as an
`nn.Parameter` in one branch of an `if` and again in another, then (in the second branch only)
replaces it with a plain tensor (`self.p = self.p.repeat(...)`): `nn.Module.__setattr__`
refuses it. The rule took the first registration only, exclusive with the replacement, and said
nothing (dualprompt's `vision_transformer.py:428`, docs/triage/unseen23.md). Each twin raises
the TypeError on real torch; the look-alike (the replacement in the branch that builds nothing,
or a local name) builds.

GT780, a loss given the batch as its input and the model's output as its target
(benchmarks/injected_blind.py's VAE mutation: `F.binary_cross_entropy(x.view(-1, 784),
recon_x)` in the `loss_function` helper the loop calls). PyTorch differentiates BCE and KL
divergence with respect to the target too, so it trains, towards the wrong optimum: each twin
measures that the model's gradient differs from the one of the loss with its arguments in
order (``holds``); each look-alike trains with the right one.

Same harness as test_heldout_shapes.py.
"""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _run

torch = pytest.importorskip("torch")

BRANCHES = """
class Prompt(nn.Module):
    def __init__(self, prefix, init):
        super().__init__()
        if not prefix:
            self.p = nn.Parameter(torch.zeros(2, 4))
        else:
            if init == "zero":
                self.p = nn.Parameter(torch.zeros(2, 1, 4))
            elif init == "uniform":
                self.p = nn.Parameter(torch.randn(2, 1, 4))
            self.p = {replace}
"""

TWINS = [
    Shape(BRANCHES.format(replace="self.p.repeat(1, 2, 1)") + "Prompt(True, 'zero')\n",
          "GT415", 11, "cannot assign"),
    Shape(BRANCHES.format(replace="self.p.expand(2, 2, 4) * 1") + "Prompt(True, 'uniform')\n",
          "GT415", 11, "cannot assign"),
]
LOOK_ALIKES = [
    Shape(BRANCHES.format(replace="nn.Parameter(self.p.repeat(1, 2, 1))")
          + "m = Prompt(True, 'zero')\n", "GT415", holds="m.p.shape == (2, 2, 4)"),
    Shape("""
class Prompt(nn.Module):
    def __init__(self, prefix):
        super().__init__()
        if prefix:
            self.p = nn.Parameter(torch.zeros(2, 1, 4))
        else:
            self.p = torch.zeros(2, 4)
m = Prompt(False)
""", "GT415", holds="not isinstance(m.p, nn.Parameter)"),
]


@pytest.mark.parametrize("i", range(len(TWINS)))
def test_twin_is_reported_and_raises(i: int) -> None:
    assert _found(TWINS[i]) == [(TWINS[i].line, "GT415")]
    _run(TWINS[i])


@pytest.mark.parametrize("i", range(len(LOOK_ALIKES)))
def test_look_alike_is_silent_and_builds(i: int) -> None:
    assert _found(LOOK_ALIKES[i]) == []
    _run(LOOK_ALIKES[i])


AE = """
model = nn.Sequential(nn.Linear(4, 4), nn.Sigmoid())
loader = torch.utils.data.DataLoader(torch.rand(8, 4), batch_size=4)
def grad_of(loss):
    model.zero_grad()
    loss.backward(retain_graph=True)
    return model[0].weight.grad.clone()
"""
SWAPPED_TWINS = [
    Shape(AE + """
def loss_function(recon_x, x):
    return F.binary_cross_entropy(x.view(-1, 4), recon_x, reduction="sum")
for data in loader:
    recon = model(data)
    loss = loss_function(recon, data)
    got = grad_of(loss)
    want = grad_of(F.binary_cross_entropy(recon, data, reduction="sum"))
""", "GT780", 9, holds="not torch.allclose(got, want)"),
    Shape(AE + """
criterion = nn.BCELoss()
for i, batch in enumerate(loader):
    batch = batch.to("cpu")
    out = model(batch)
    loss = criterion(batch, out)
    got = grad_of(loss)
    want = grad_of(criterion(out, batch))
""", "GT780", 12, holds="not torch.allclose(got, want)"),
]
SWAPPED_LOOK_ALIKES = [
    Shape(AE + """
def loss_function(recon_x, x):
    return F.binary_cross_entropy(recon_x, x.view(-1, 4), reduction="sum")
for data in loader:
    recon = model(data)
    loss = loss_function(recon, data)
    got = grad_of(loss)
""", "GT780", holds="got.abs().sum() > 0"),
    # distillation: the teacher's output is the target, the student's the input
    Shape(AE + """
teacher = nn.Sequential(nn.Linear(4, 4), nn.Softmax(-1))
for data in loader:
    with torch.no_grad():
        soft = teacher(data)
    loss = F.kl_div(model(data).log(), soft, reduction="batchmean")
    got = grad_of(loss)
""", "GT780", holds="got.abs().sum() > 0"),
]


@pytest.mark.parametrize("i", range(len(SWAPPED_TWINS)))
def test_swapped_loss_twin_is_reported_and_trains_elsewhere(i: int) -> None:
    assert _found(SWAPPED_TWINS[i]) == [(SWAPPED_TWINS[i].line, "GT780")]
    _run(SWAPPED_TWINS[i])


@pytest.mark.parametrize("i", range(len(SWAPPED_LOOK_ALIKES)))
def test_swapped_loss_look_alike_is_silent(i: int) -> None:
    assert _found(SWAPPED_LOOK_ALIKES[i]) == []
    _run(SWAPPED_LOOK_ALIKES[i])


# GT609 with SAC's temperature: `log_alpha` is a `Scalar` module whose forward returns its
# parameter; the policy loss reads it as `self.log_alpha().exp()`. `exp` saves its output, not
# the parameter, so stepping the temperature's optimizer between the policy loss's forward and
# backward breaks nothing (CORL's cql.py, docs/triage/unseen24.md); a product with a factor that
# takes a gradient saves it, and the backward raises.
SAC = """
class Scalar(nn.Module):
    def __init__(self, v):
        super().__init__()
        self.constant = nn.Parameter(torch.tensor(v))
    def forward(self):
        return self.constant
class Agent:
    def __init__(self):
        self.actor = nn.Linear(3, 1)
        self.log_alpha = Scalar(0.0)
        self.alpha_optimizer = torch.optim.Adam(self.log_alpha.parameters(), lr=0.1)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=0.1)
    def train(self, obs):
        log_pi = self.actor(obs).squeeze(-1)
        alpha_loss = -(self.log_alpha() * (log_pi - 1.0).detach()).mean()
        alpha = {alpha}
        policy_loss = (alpha * log_pi).mean()
        self.alpha_optimizer.zero_grad()
        alpha_loss.backward()
        self.alpha_optimizer.step()
        self.actor_optimizer.zero_grad()
        policy_loss.backward()
        self.actor_optimizer.step()
agent = Agent()
agent.train(torch.randn(4, 3))
"""
SAC_LOOK_ALIKE = Shape(SAC.format(alpha="self.log_alpha().exp() * 1.0"), "GT609",
                       holds="agent.actor.weight.grad is not None")
SAC_TWIN = Shape(SAC.replace("policy_loss = (alpha * log_pi).mean()",
                             "policy_loss = (self.log_alpha() * log_pi).mean()").format(
                                 alpha="None"), "GT609", 20, "modified by an inplace operation")


def test_sac_temperature_read_through_exp_is_silent() -> None:
    assert _found(SAC_LOOK_ALIKE) == []
    _run(SAC_LOOK_ALIKE)


def test_sac_temperature_saved_by_a_product_is_reported() -> None:
    assert _found(SAC_TWIN) == [(SAC_TWIN.line, "GT609")]
    _run(SAC_TWIN)
