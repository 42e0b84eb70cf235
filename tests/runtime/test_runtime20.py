"""Session-20 run-time readings on held-out 13's silent misses (docs/triage/runtime20.md):

- GT875 (NOTE [functional dropout in eval]): ``F.dropout(x, p)`` without ``training=`` run by a
  module in eval mode keeps dropping;
- GT876 (NOTE [clip of parameters no step uses]): the gradients clipped are not those of the
  optimizer that steps next.

Buggy twins in spellings other than the real-world cases (DME, SciTSR, OpenSpiel), and
look-alikes that stay silent. Real torch, in-process.
"""
from __future__ import annotations

import pytest
from rt_helpers import marked_line

DROP_HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
x, y = torch.randn(16, 3, 8, 8), torch.randint(0, 4, (16,))
"""

DROP_BUGS = {
    # the dropout in a helper function the forward calls, p positional
    "helper_function_positional_p": """
def regularise(h, rate):
    return F.dropout(h, rate)  # <- cause

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 64, 4)

    def forward(self, inp):
        return self.fc(regularise(self.conv(inp).flatten(1), 0.3))

net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    F.cross_entropy(net(x), y).backward()
    opt.step()
net.eval()
scores = [net(x).argmax(1) for _ in range(2)]
""",
    # a channel dropout in a sub-block, inference with grad on (no no_grad), eval via the parent
    "dropout2d_in_child_block": """
class Block(nn.Module):
    def __init__(self, rate):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.rate = rate

    def forward(self, inp):
        h = torch.relu(self.conv(inp))
        return torch.nn.functional.dropout2d(h, p=self.rate, inplace=False)  # <- cause

model = nn.Sequential(Block(0.2), nn.Flatten(), nn.Linear(6 * 64, 4))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for _ in range(2):
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
model.eval()
a, b = model(x), model(x)
""",
}

DROP_LOOKALIKES = {
    # the module's mode passed, as a keyword and positionally
    "training_follows_mode": """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(192, 32), nn.Linear(32, 4)

    def forward(self, inp):
        h = F.dropout(self.fc1(inp.flatten(1)), 0.5, self.training)
        return self.fc2(F.dropout(h, p=0.5, training=self.training))

net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    F.cross_entropy(net(x), y).backward()
    opt.step()
net.eval()
with torch.no_grad():
    out = net(x)
""",
    # Monte-Carlo dropout: training=True written on purpose, and p=0 by default
    "mc_dropout_and_zero_rate": """
class Net(nn.Module):
    def __init__(self, p=0.0):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(192, 32), nn.Linear(32, 4)
        self.p = p

    def forward(self, inp, mc=False):
        h = F.dropout(self.fc1(inp.flatten(1)), p=self.p)
        return self.fc2(F.dropout(h, p=0.3, training=mc or self.training))

net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    F.cross_entropy(net(x), y).backward()
    opt.step()
net.eval()
with torch.no_grad():
    samples = torch.stack([net(x, mc=True).softmax(-1) for _ in range(4)])
""",
    # functional dropout without training=, but the model only ever runs in train mode;
    # and nn.Dropout layers evaluated in eval mode
    "train_mode_only_and_dropout_layers": """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(192, 32), nn.Linear(32, 4)

    def forward(self, inp):
        return self.fc2(F.dropout(self.fc1(inp.flatten(1)), p=0.2))

net = Net()
head = nn.Sequential(nn.Flatten(), nn.Dropout(0.5), nn.Linear(192, 4))
opt = torch.optim.SGD([*net.parameters(), *head.parameters()], lr=0.1)
for _ in range(3):
    opt.zero_grad()
    (F.cross_entropy(net(x), y) + F.cross_entropy(head(x), y)).backward()
    opt.step()
head.eval()
with torch.no_grad():
    out = head(x)
""",
}


@pytest.mark.parametrize("name", sorted(DROP_BUGS))
def test_functional_dropout_in_eval_named(name, run_script):
    src = DROP_HEAD + DROP_BUGS[name]
    res = run_script(src)
    assert res.code == 0, res.err
    assert res.findings, res.err
    first = res.findings[0]
    want = ("GT875", marked_line(src), "prog.py")
    assert (first["code"], first["line"], first["path"]) == want, res.findings


@pytest.mark.parametrize("name", sorted(DROP_LOOKALIKES))
def test_functional_dropout_lookalikes_silent(name, run_script):
    res = run_script(DROP_HEAD + DROP_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert "GT875" not in res.codes(), res.findings


CLIP_HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import clip_grad_norm_, clip_grad_value_

torch.manual_seed(0)
gen = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8))
disc = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
opt_g = torch.optim.Adam(gen.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(disc.parameters(), lr=1e-3)
real = torch.randn(32, 8)
"""

CLIP_BUGS = {
    # a GAN whose generator update clips the discriminator (its gradients from the D step)
    "gan_generator_clips_discriminator": """
for it in range(4):
    z = torch.randn(32, 4)
    d_loss = F.softplus(disc(gen(z).detach())).mean() + F.softplus(-disc(real)).mean()
    opt_d.zero_grad()
    d_loss.backward()
    clip_grad_norm_(disc.parameters(), 1.0)
    opt_d.step()
    g_loss = F.softplus(-disc(gen(z))).mean()
    opt_g.zero_grad()
    g_loss.backward()
    clip_grad_norm_(disc.parameters(), 1.0)  # <- cause
    opt_g.step()
""",
    # actor and critic with an optimizer each; the actor's value clip given the critic's groups
    "value_clip_of_other_optimizer_groups": """
class Agent:
    def __init__(self):
        self.actor, self.critic = nn.Linear(8, 3), nn.Linear(8, 1)
        self.actor_opt = torch.optim.SGD(self.actor.parameters(), lr=0.1)
        self.critic_opt = torch.optim.SGD(self.critic.parameters(), lr=0.1)

    def critic_step(self, states):
        loss = self.critic(states).pow(2).mean()
        self.critic_opt.zero_grad()
        loss.backward()
        self.critic_opt.step()

    def actor_step(self, states):
        loss = -self.actor(states).log_softmax(-1)[:, 0].mean()
        self.actor_opt.zero_grad()
        loss.backward()
        params = [p for g in self.critic_opt.param_groups for p in g["params"]]
        clip_grad_value_(params, 0.1)  # <- cause
        self.actor_opt.step()

agent = Agent()
for _ in range(3):
    agent.critic_step(real)
    agent.actor_step(real)
""",
}

CLIP_LOOKALIKES = {
    # each network clipped before its own optimizer steps
    "each_clipped_before_its_step": """
for it in range(4):
    z = torch.randn(32, 4)
    d_loss = F.softplus(disc(gen(z).detach())).mean() + F.softplus(-disc(real)).mean()
    opt_d.zero_grad()
    d_loss.backward()
    clip_grad_norm_(disc.parameters(), 1.0)
    opt_d.step()
    g_loss = F.softplus(-disc(gen(z))).mean()
    opt_g.zero_grad()
    g_loss.backward()
    clip_grad_norm_(gen.parameters(), 1.0)
    opt_g.step()
""",
    # everything clipped at once, then both optimizers step (the clipped one second)
    "all_clipped_then_both_step": """
for it in range(3):
    loss = F.softplus(-disc(gen(torch.randn(32, 4)))).mean() + disc(real).pow(2).mean()
    opt_g.zero_grad()
    opt_d.zero_grad()
    loss.backward()
    clip_grad_norm_([*gen.parameters(), *disc.parameters()], 0.5)
    opt_g.step()
    opt_d.step()
    clip_grad_norm_(gen.parameters(), 0.5)
""",
    # one network clipped, the other optimizer steps first, then the clipped one's
    "clipped_network_steps_second": """
for it in range(3):
    loss = F.softplus(-disc(gen(torch.randn(32, 4)))).mean()
    opt_g.zero_grad()
    opt_d.zero_grad()
    loss.backward()
    clip_grad_norm_(disc.parameters(), 0.5)
    opt_g.step()
    opt_d.step()
""",
    # the clipped parameters updated by hand (no optimizer holds them), the other optimizer
    # stepping its own unclipped
    "clipped_then_updated_by_hand": """
fast = nn.Linear(8, 1)
for it in range(3):
    loss = fast(gen(torch.randn(32, 4))).pow(2).mean()
    gen.zero_grad()
    fast.zero_grad()
    loss.backward()
    clip_grad_norm_(fast.parameters(), 0.5)
    with torch.no_grad():
        for p in fast.parameters():
            p -= 0.01 * p.grad
    opt_g.step()
""",
}


@pytest.mark.parametrize("name", sorted(CLIP_BUGS))
def test_clip_not_stepped_named(name, run_script):
    src = CLIP_HEAD + CLIP_BUGS[name]
    res = run_script(src)
    assert res.code == 0, res.err
    assert res.findings, res.err
    first = res.findings[0]
    want = ("GT876", marked_line(src), "prog.py")
    assert (first["code"], first["line"], first["path"]) == want, res.findings


@pytest.mark.parametrize("name", sorted(CLIP_LOOKALIKES))
def test_clip_lookalikes_silent(name, run_script):
    res = run_script(CLIP_HEAD + CLIP_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert "GT876" not in res.codes(), res.findings


EVAL_HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

class Encoder(nn.Module):
    def __init__(self, p=0.2, norm=False):
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.drop = nn.Dropout(p)
        self.norm = nn.BatchNorm1d(16) if norm else nn.Identity()
        self.proj = nn.Linear(16, 16)

    def forward(self, ids):
        return self.proj(self.norm(self.drop(self.emb(ids).mean(1))))

class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(16, 32), nn.Dropout(0.1), nn.Linear(32, 4))

    def forward(self, h):
        return self.fc(h)

def load_pretrained(**kw):
    enc = Encoder(**kw)
    enc.eval()
    return enc

ids, y = torch.randint(0, 50, (8, 5)), torch.randint(0, 4, (8,))
"""

EVAL_BUGS = {
    # param groups, an epoch loop around a step loop, the decoder switched in the outer loop
    "groups_outer_loop_switch": """
encoder, decoder = load_pretrained(), Decoder()
opt = torch.optim.AdamW([{"params": decoder.parameters()},
                         {"params": encoder.parameters(), "lr": 1e-5}], lr=1e-3)
for epoch in range(2):
    decoder.train(True)  # <- cause
    for step in range(3):
        loss = F.cross_entropy(decoder(encoder(ids)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
""",
    # a while loop in a function, the models held by an object
    "while_loop_in_function": """
class Pipeline:
    def __init__(self):
        self.text = load_pretrained(p=0.3)
        self.head = Decoder()

def fit(pipe, steps):
    params = list(pipe.head.parameters()) + list(pipe.text.parameters())
    opt = torch.optim.SGD(params, lr=0.1)
    done = 0
    while done < steps:
        pipe.head.train()  # <- cause
        out = pipe.head(pipe.text(ids))
        F.cross_entropy(out, y).backward()
        opt.step()
        opt.zero_grad()
        done += 1

fit(Pipeline(), 3)
""",
}

EVAL_LOOKALIKES = {
    # both models switched to train mode
    "both_switched": """
encoder, decoder = load_pretrained(), Decoder()
opt = torch.optim.AdamW([*decoder.parameters(), *encoder.parameters()], lr=1e-3)
for epoch in range(2):
    decoder.train()
    encoder.train()
    for step in range(3):
        loss = F.cross_entropy(decoder(encoder(ids)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
""",
    # the eval model frozen (no gradient), and one without dropout kept in eval for its
    # batch-norm statistics while trained
    "frozen_or_norm_only": """
frozen, normed, decoder = load_pretrained(), load_pretrained(p=0.0, norm=True), Decoder()
frozen.requires_grad_(False)
opt = torch.optim.AdamW([*decoder.parameters(), *normed.parameters()], lr=1e-3)
for epoch in range(2):
    decoder.train()
    for step in range(3):
        loss = F.cross_entropy(decoder(frozen(ids) + normed(ids)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
""",
    # the eval model is a part of a model in train mode (switched off on purpose inside it)
    "eval_part_of_training_model": """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder, self.decoder = load_pretrained(), Decoder()

    def forward(self, ids):
        return self.decoder(self.encoder(ids))

model = Model()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for epoch in range(2):
    model.train()
    model.encoder.eval()
    for step in range(3):
        loss = F.cross_entropy(model(ids), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(EVAL_BUGS))
def test_left_in_eval_beside_trained_named(name, run_script):
    src = EVAL_HEAD + EVAL_BUGS[name]
    res = run_script(src)
    assert res.code == 0, res.err
    assert res.findings, res.err
    first = res.findings[0]
    want = ("GT516", marked_line(src), "prog.py")
    assert (first["code"], first["line"], first["path"]) == want, res.findings


@pytest.mark.parametrize("name", sorted(EVAL_LOOKALIKES))
def test_left_in_eval_lookalikes_silent(name, run_script):
    res = run_script(EVAL_HEAD + EVAL_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert "GT516" not in res.codes(), res.findings


CACHE_HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parametrize
from torch.nn.utils.parametrize import cached

torch.manual_seed(0)

class Bounded(nn.Module):
    def forward(self, X):
        return 2 * torch.tanh(X)

layer = nn.Linear(6, 6)
parametrize.register_parametrization(layer, "weight", Bounded())
head = nn.Linear(6, 1)
opt = torch.optim.Adam([*layer.parameters(), *head.parameters()], lr=1e-3)
"""

CACHE_BUGS = {
    # the cache opened by a helper's caller around a whole epoch, `cached` imported by name
    "epoch_inside_cache_in_function": """
def epoch(batches):
    for x, y in batches:
        loss = F.mse_loss(head(torch.relu(layer(x))).squeeze(1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

def fit():
    batches = [(torch.randn(4, 6), torch.randn(4)) for _ in range(3)]
    with cached():  # <- cause
        epoch(batches)

fit()
""",
}

CACHE_LOOKALIKES = {
    # the cache opened around each step's forward and backward
    "cache_per_step": """
for _ in range(3):
    x, y = torch.randn(4, 6), torch.randn(4)
    with parametrize.cached():
        out = head(layer(x)) + head(layer(2 * x))
        loss = F.mse_loss(out.squeeze(1), y)
        opt.zero_grad()
        loss.backward()
    opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(CACHE_BUGS))
def test_cached_block_named(name, run_script):
    src = CACHE_HEAD + CACHE_BUGS[name]
    res = run_script(src)
    assert res.code == 1, res.err
    first = res.findings[0]
    want = ("GT507", marked_line(src), "prog.py")
    assert (first["code"], first["line"], first["path"]) == want, res.findings


def test_cached_block_not_named_for_another_graph(run_script):
    """A hidden state carried across steps inside a cache: the state's diagnosis, not the block."""
    src = CACHE_HEAD + """
rnn = nn.RNNCell(6, 6)
opt2 = torch.optim.SGD(rnn.parameters(), lr=0.1)
h = torch.zeros(4, 6)
with parametrize.cached():
    for _ in range(3):
        h = rnn(torch.randn(4, 6), h)  # <- cause
        loss = h.pow(2).mean()
        opt2.zero_grad()
        loss.backward()
        opt2.step()
"""
    res = run_script(src)
    assert res.code == 1, res.err
    lines = {f["line"] for f in res.findings}
    assert marked_line(src) - 4 not in lines, res.findings  # never the `with` line
    assert res.findings[0]["line"] == marked_line(src), res.findings


@pytest.mark.parametrize("name", sorted(CACHE_LOOKALIKES))
def test_cached_block_lookalikes_silent(name, run_script):
    res = run_script(CACHE_HEAD + CACHE_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert not res.findings, res.findings
