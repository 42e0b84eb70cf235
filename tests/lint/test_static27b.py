"""Readings of docs/triage/static27b.md, each in spellings the real-world cases do not use, as a
buggy twin whose run on real torch shows what the finding says and a correct look-alike; the
checker reports the first (code and line) and stays silent on the second."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
'''

# GT406 across methods: two optimizers built as attributes over one spelled collection,
# both stepped after one backward in another method (NOTE [optimizers built as attributes])
TWO_OPTS = '''
def gather(mods):
    out = []
    for m in mods:
        out += list(m.parameters())
    return out
class Trainer:
    def __init__(self):
        self.blocks = [nn.Linear(4, 4), nn.Linear(4, 1)]
        self.heads = [nn.Linear(4, 1)]
    def setup(self):
        self.opt_main = torch.optim.SGD(gather(self.blocks), lr=0.1)
        self.opt_aux = torch.optim.SGD(SECOND, lr=0.1)
    def train_step(self, x):
        self.opt_main.zero_grad()
        self.opt_aux.zero_grad()
        loss = self.blocks[1](self.blocks[0](x)).pow(2).mean() + self.heads[0](x).pow(2).mean()
        loss.backward()
        g = self.blocks[1].weight.grad.clone()
        self.opt_main.step()
        self.opt_aux.step()
        return g
t = Trainer()
t.setup()
w0 = t.blocks[1].weight.detach().clone()
g = t.train_step(torch.randn(8, 4))
moved = (w0 - t.blocks[1].weight).div(0.1 * g)
'''

# GT406 through a constructor argument: the auxiliary module keeps the body's trunk, so its
# optimizer over all its parameters steps the trunk the body's optimizer steps too
SHARED = '''
class Body(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Linear(4, 4)
        self.out = nn.Linear(4, 1)
class Aux(nn.Module):
    def __init__(self, body, dim=4):
        super().__init__()
        self.trunk = body.trunk
        self.proj = nn.Linear(dim, dim)
    def forward(self, x):
        return self.proj(self.trunk(x))
class Agent:
    def __init__(self):
        self.body = Body()
        self.aux = Aux(self.body)
        self.body_opt = torch.optim.SGD(self.body.parameters(), lr=0.1)
        self.aux_opt = torch.optim.SGD(self.aux.parameters(), lr=0.1)
    def update(self, x):
        self.body_opt.zero_grad()
        self.aux_opt.zero_grad()
        (self.body.out(self.body.trunk(x)).mean() + self.aux(x).pow(2).mean()).backward()
        g = self.body.trunk.weight.grad.clone()
        STEPS
        return g
agent = Agent()
w0 = agent.body.trunk.weight.detach().clone()
g = agent.update(torch.randn(8, 4))
moved = (w0 - agent.body.trunk.weight).div(0.1 * g)
'''

# GT462, one part per optimizer (NOTE [one part per optimizer]): a pipeline builds one optimizer
# per part and gives the VAE's only its encoder; the VAE's forward runs its decoder too
PER_PART = '''
class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(6, 4)
        self.dec = nn.Linear(2, 6)
    def forward(self, x):
        mu, logvar = self.enc(x).chunk(2, -1)
        return self.dec(mu + torch.randn_like(mu) * (0.5 * logvar).exp())
class Pipeline:
    def __init__(self):
        self.vae = VAE()
        self.cls = nn.Linear(6, 3)
    def optimizers(self):
        return [torch.optim.SGD(self.cls.parameters(), lr=0.1),
                torch.optim.SGD(VAE_PARAMS, lr=0.1)]
    def step(self, opts, x, y):
        for o in opts:
            o.zero_grad()
        F.cross_entropy(self.cls(self.vae(x)), y).backward()
        for o in opts:
            o.step()
pipe = Pipeline()
opts = pipe.optimizers()
d0 = pipe.vae.dec.weight.detach().clone()
pipe.step(opts, torch.randn(8, 6), torch.randint(0, 3, (8,)))
dec_moved = not torch.equal(d0, pipe.vae.dec.weight)
'''

# GT426: a decoder projection tied to the encoder's embedding; the encoder is frozen in a helper
# and the decoder given to the optimizer: the tied projection cannot move
TIED = '''
class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.ModuleDict({"embed": nn.Embedding(12, 6)})
        self.decoder = nn.Sequential(nn.LayerNorm(6), nn.Linear(6, 12, bias=False))
        self.decoder[1].weight = self.encoder.embed.weight
    def forward(self, ids):
        return self.decoder(self.encoder["embed"](ids))
def finetune(model):
    for w in model.encoder.parameters():
        w.requires_grad_(False)
    AFTER
    return torch.optim.SGD(model.decoder.parameters(), lr=0.5)
model = Seq2Seq()
opt = finetune(model)
w0 = model.decoder[1].weight.detach().clone()
F.cross_entropy(model(torch.randint(0, 12, (4, 3))).flatten(0, 1), torch.randint(0, 12, (12,))).backward()
opt.step()
tied_moved = not torch.equal(w0, model.decoder[1].weight)
'''

# GT462 in a learner class (not a module): a `+` chain of listed parts, one part left out and
# run before the learner's backward
LEARNER = '''
class Learner:
    def __init__(self):
        self.encoder = nn.Linear(6, 8)
        self.actor = nn.Linear(8, 2)
        self.critic = nn.Linear(8, 1)
        self.target = nn.Linear(8, 1)
        self.target.load_state_dict(self.critic.state_dict())
        self.params = list(self.encoder.parameters()) + PARTS
        self.opt = torch.optim.Adam(self.params, lr=1e-2)
    def update(self, obs, ret):
        h = torch.relu(self.encoder(obs))
        with torch.no_grad():
            base = self.target(h)
        v = self.critic(h)
        loss = F.mse_loss(v, ret) + (self.actor(h).logsumexp(-1) * (ret - base)).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
learner = Learner()
c0 = learner.critic.weight.detach().clone()
for _ in range(3):
    learner.update(torch.randn(16, 6), torch.randn(16, 1))
critic_moved = not torch.equal(c0, learner.critic.weight)
critic_has_grad = learner.critic.weight.grad.abs().sum().item() > 0
'''

# GT424: groups gathered by attribute name inside a module's own method; the recurrent layer's
# parameters are `weight_ih_l0`..., not `.weight`
ATTR_GROUPS = '''
class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 8)
        self.rnn = nn.GRU(8, 8, batch_first=True)
        self.out = nn.Linear(8, 3)
    def forward(self, ids):
        return self.out(self.rnn(self.embed(ids))[0])
    def make_optimizer(self):
        decay, plain = [], []
        for _, mod in self.named_modules():
            GATHER
        return torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                  {"params": plain, "weight_decay": 0.0}], lr=1e-2)
tagger = Tagger()
opt = tagger.make_optimizer()
r0 = tagger.rnn.weight_hh_l0.detach().clone()
loss = F.cross_entropy(tagger(torch.randint(0, 20, (4, 5))).flatten(0, 1), torch.randint(0, 3, (20,)))
loss.backward()
opt.step()
rnn_moved = not torch.equal(r0, tagger.rnn.weight_hh_l0)
'''
BY_NAME = '''if isinstance(getattr(mod, "weight", None), nn.Parameter):
                decay.append(mod.weight)
            if isinstance(getattr(mod, "bias", None), nn.Parameter):
                plain.append(mod.bias)'''
BY_PARAMS = '''for pname, p in mod.named_parameters(recurse=False):
                (decay if pname.startswith("weight") else plain).append(p)'''

# GT425: ids of two parts taken out of the rest, a filter over the model, one part listed
EXCLUDED = '''
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(5, 8)
        self.proj = nn.Linear(8, 8)
        self.cls = nn.Linear(8, 2)
    def forward(self, x):
        return self.cls(torch.relu(self.proj(torch.relu(self.stem(x)))))
def configure(net, lr):
    skip = {id(p) for p in net.stem.parameters()} | {id(p) for p in net.proj.parameters()}
    others = filter(lambda p: id(p) not in skip, net.parameters())
    groups = [{"params": net.stem.parameters(), "lr": lr * 0.1},
              EXTRA{"params": others}]
    return torch.optim.SGD(groups, lr=lr)
net = Net()
opt = configure(net, 0.1)
p0 = net.proj.weight.detach().clone()
F.cross_entropy(net(torch.randn(6, 5)), torch.randint(0, 2, (6,))).backward()
opt.step()
proj_moved = not torch.equal(p0, net.proj.weight)
'''

# GT722: the interpolation factor made as a column then viewed to the image's rank; the norm
# spelt as torch.linalg.vector_norm
PENALTY = '''
critic = nn.Sequential(nn.Flatten(), nn.Linear(3 * 4 * 4, 1))
def penalty(real, fake):
    b = real.size(0)
    eps = torch.rand(b, 1)
    eps = eps.expand(b, real.nelement() // b).contiguous().view(b, 3, 4, 4)
    mixed = torch.autograd.Variable(eps * real + (1 - eps) * fake, requires_grad=True)
    score = critic(mixed)
    g = torch.autograd.grad(outputs=score, inputs=mixed, grad_outputs=torch.ones_like(score),
                            create_graph=True)[0]
    FLATTEN
    return ((torch.linalg.vector_norm(g, dim=1) - 1) ** 2).mean(), g
real, fake = torch.randn(5, 3, 4, 4), torch.randn(5, 3, 4, 4)
gp, g = penalty(real, fake)
per_sample = ((g.reshape(5, -1).norm(dim=1) - 1) ** 2).mean()
same = torch.allclose(gp, per_sample)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT406: look-alike steps the other parts; the twin steps the same weights twice (the
    # change is two SGD steps of the same gradient)
    "two-attribute-optimizers-same-collection": (Shape(
        TWO_OPTS.replace("SECOND", "gather(self.heads)"), "GT406",
        holds="torch.allclose(moved, torch.ones_like(moved), atol=1e-4)"), Shape(
        TWO_OPTS.replace("SECOND", "gather(self.blocks)"), "GT406", 12,
        holds="torch.allclose(moved, 2 * torch.ones_like(moved), atol=1e-4)")),
    # GT406: the trunk shared through Aux's constructor, both optimizers stepped after one
    # backward (the trunk moves by two steps); look-alike: only the body's optimizer steps
    # in this pass
    "constructor-shared-trunk-in-two-optimizers": (Shape(
        SHARED.replace("STEPS", "self.body_opt.step()"), "GT406",
        holds="torch.allclose(moved, torch.ones_like(moved), atol=1e-4)"), Shape(
        SHARED.replace("STEPS", "self.body_opt.step()\n        self.aux_opt.step()"), "GT406",
        18, holds="torch.allclose(moved, 2 * torch.ones_like(moved), atol=1e-4)")),
    # GT462 one part per optimizer: the decoder in no optimizer; look-alike: the VAE's optimizer
    # lists both parts
    "per-part-optimizers-miss-decoder": (Shape(
        PER_PART.replace("VAE_PARAMS", "[*self.vae.enc.parameters(), *self.vae.dec.parameters()]"),
        "GT462", holds="dec_moved"), Shape(
        PER_PART.replace("VAE_PARAMS", "self.vae.enc.parameters()"), "GT462", 14,
        holds="not dec_moved")),
    # GT426: freezing the encoder freezes the decoder's tied projection; look-alike: the shared
    # weight is made trainable again after the loop
    "tied-weight-frozen-with-encoder": (Shape(
        TIED.replace("AFTER", "model.encoder.embed.weight.requires_grad_(True)"), "GT426",
        holds="tied_moved"), Shape(
        TIED.replace("AFTER", "pass"), "GT426", 11, holds="not tied_moved")),
    # GT462 in a learner class: the critic trained by the loss but left out of the `+` chain
    # (the target net, loaded and run under no_grad, is not a missing part)
    "learner-sum-of-part-lists-misses-critic": (Shape(
        LEARNER.replace("PARTS", "list(self.actor.parameters()) + list(self.critic.parameters())"),
        "GT462", holds="critic_moved"), Shape(
        LEARNER.replace("PARTS", "list(self.actor.parameters())"), "GT462", 8,
        holds="critic_has_grad and not critic_moved")),
    # GT424: groups by `.weight`/`.bias` miss the GRU's weight_ih_l0...; look-alike reads every
    # parameter of each module by name
    "attribute-groups-miss-recurrent-weights": (Shape(
        ATTR_GROUPS.replace("GATHER", BY_PARAMS), "GT424", holds="rnn_moved"), Shape(
        ATTR_GROUPS.replace("GATHER", BY_NAME), "GT424", 16, holds="not rnn_moved")),
    # GT425: `proj` excluded from the rest and listed nowhere; look-alike lists it
    "id-excluded-part-in-no-group": (Shape(
        EXCLUDED.replace("EXTRA", '{"params": net.proj.parameters()}, '), "GT425",
        holds="proj_moved"), Shape(
        EXCLUDED.replace("EXTRA", ""), "GT425", 13, holds="not proj_moved")),
    # GT722: look-alike flattens the gradient; the twin's penalty differs from the per-sample
    "penalty-vector-norm-over-channels": (Shape(
        PENALTY.replace("FLATTEN", "g = g.reshape(len(g), -1)"), "GT722", holds="same"), Shape(
        PENALTY.replace("FLATTEN", "pass"), "GT722", 11, holds="not same")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
