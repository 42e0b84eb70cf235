"""The lead's fixes of session 26.

GT580, a model whose every output in the pass is detached where it is made
(benchmarks/injected_blind.py's DCGAN mutation: `fake = netG(noise).detach()` reused for the
generator's loss). The generator's backward stops at the detach and its optimizer's step finds
no gradient: each twin measures on real torch that the stepped model's parameters did not move
(``holds``), and that GT522 (the discriminator's step before that backward: a symptom) is not
said instead; each look-alike trains the model and is silent.

Same harness as test_heldout_shapes.py.
"""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _run

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

GAN = """
G, D = nn.Linear(4, 4), nn.Sequential(nn.Linear(4, 1), nn.Sigmoid())
opt_g = torch.optim.Adam(G.parameters(), lr=0.1)
opt_d = torch.optim.Adam(D.parameters(), lr=0.1)
bce = nn.BCELoss()
loader = [(torch.randn(8, 4), torch.randn(8, 4)) for _ in range(3)]
before = G.weight.detach().clone()
"""
TWINS = [
    Shape(GAN + """
for real, z in loader:
    D.zero_grad()
    fake = G(z).detach()
    err_d = bce(D(real), torch.ones(8, 1)) + bce(D(fake), torch.zeros(8, 1))
    err_d.backward()
    opt_d.step()
    G.zero_grad()
    err_g = bce(D(fake), torch.ones(8, 1))
    err_g.backward()
    opt_g.step()
""", "GT580", 10, holds="torch.equal(G.weight, before)"),
    # a per-batch method of a trainer class, no loop: the generator's output detached where
    # the step function makes it, the optimizers held on self
    Shape("""
class Trainer:
    def __init__(self):
        self.gen = nn.Linear(4, 4)
        self.critic = nn.Linear(4, 1)
        self.g_opt = torch.optim.SGD(self.gen.parameters(), lr=0.1)
        self.c_opt = torch.optim.SGD(self.critic.parameters(), lr=0.1)

    def train_step(self, real, noise):
        sample = self.gen(noise).detach()
        self.c_opt.zero_grad()
        c_loss = self.critic(sample).mean() - self.critic(real).mean()
        c_loss.backward()
        self.c_opt.step()
        self.g_opt.zero_grad()
        g_loss = -self.critic(sample).mean()
        g_loss.backward()
        self.g_opt.step()
t = Trainer()
before = t.gen.weight.detach().clone()
t.train_step(torch.randn(8, 4), torch.randn(8, 4))
""", "GT580", 9, holds="torch.equal(t.gen.weight, before)"),
    # not a GAN: an encoder with its own optimizer whose features are detached for the head
    Shape("""
encoder, head = nn.Linear(4, 4), nn.Linear(4, 2)
opt_enc = torch.optim.SGD(encoder.parameters(), lr=0.1)
opt_head = torch.optim.SGD(head.parameters(), lr=0.1)
before = encoder.weight.detach().clone()
for x, y in [(torch.randn(8, 4), torch.randint(0, 2, (8,)))]:
    opt_enc.zero_grad()
    opt_head.zero_grad()
    feats = encoder(x).detach()
    loss = F.cross_entropy(head(feats), y)
    loss.backward()
    opt_head.step()
    opt_enc.step()
""", "GT580", 8, holds="torch.equal(encoder.weight, before)"),
]
LOOK_ALIKES = [
    # the fix: detach only the discriminator's input
    Shape(GAN + """
for real, z in loader:
    D.zero_grad()
    fake = G(z)
    err_d = bce(D(real), torch.ones(8, 1)) + bce(D(fake.detach()), torch.zeros(8, 1))
    err_d.backward()
    opt_d.step()
    G.zero_grad()
    err_g = bce(D(fake), torch.ones(8, 1))
    err_g.backward()
    opt_g.step()
""", "GT580", holds="not torch.equal(G.weight, before)"),
    # detached for the discriminator, the generator called again for its own loss
    Shape(GAN + """
for real, z in loader:
    D.zero_grad()
    fake = G(z).detach()
    err_d = bce(D(real), torch.ones(8, 1)) + bce(D(fake), torch.zeros(8, 1))
    err_d.backward()
    opt_d.step()
    G.zero_grad()
    err_g = bce(D(G(z)), torch.ones(8, 1))
    err_g.backward()
    opt_g.step()
""", "GT580", holds="not torch.equal(G.weight, before)"),
    # the generator's loss computed by a helper given the model: what it does is not judged
    Shape(GAN + """
def g_loss(gen, disc, z):
    return bce(disc(gen(z)), torch.ones(8, 1))
for real, z in loader:
    D.zero_grad()
    fake = G(z).detach()
    err_d = bce(D(real), torch.ones(8, 1)) + bce(D(fake), torch.zeros(8, 1))
    err_d.backward()
    opt_d.step()
    G.zero_grad()
    err_g = g_loss(G, D, z)
    err_g.backward()
    opt_g.step()
""", "GT580", holds="not torch.equal(G.weight, before)"),
]


@pytest.mark.parametrize("i", range(len(TWINS)))
def test_detached_model_twin_is_reported_and_never_moves(i: int) -> None:
    assert _found(TWINS[i]) == [(TWINS[i].line, "GT580")]
    _run(TWINS[i])


@pytest.mark.parametrize("i", range(len(LOOK_ALIKES)))
def test_detached_model_look_alike_is_silent_and_trains(i: int) -> None:
    assert _found(LOOK_ALIKES[i]) == []
    _run(LOOK_ALIKES[i])


def test_detached_generator_is_not_blamed_on_the_discriminator_step() -> None:
    from test_heldout_shapes import PRELUDE
    found = check_source(PRELUDE + TWINS[0].src, "gan.py")
    assert "GT522" not in {f.code for f in found}
    assert "GT580" in {f.code for f in found}


# GT716 with a seed scaled before use (held-out 20's WaveGAN case): `neg_one = one * -1` keeps
# `one`'s shape, so the finding names `one`'s line, once for all the backward calls it feeds.
SEED = """
net = nn.Linear(4, 1)
one = torch.FloatTensor([1]){fix}
neg_one = one * -1
real = net(torch.randn(8, 4)).mean()
fake = net(torch.randn(8, 4)).mean()
real.backward(neg_one)
fake.backward(one)
"""


def test_scaled_seed_is_named_where_its_shape_is_made() -> None:
    twin = Shape(SEED.format(fix=""), "GT716", 2, raises="Mismatch in shape")
    assert _found(twin) == [(2, "GT716")]
    _run(twin)


def test_scalar_seed_scaled_is_silent() -> None:
    good = Shape(SEED.format(fix=".squeeze()"), "GT716", holds="net.weight.grad is not None")
    assert _found(good) == []
    _run(good)
