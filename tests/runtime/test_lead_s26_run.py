"""The lead's run-time fix of session 26: a parameter left out of the one optimizer that
stepped is named at the line that LISTS the optimizer's parameters when the constructor is
given a name bound to that list (`self.params = list(a.parameters()) + list(b.parameters())`,
then `RMSprop(self.params)`): the fix adds the missing model there, not on the constructor's
line (held-out 20's MAVEN case, docs/triage/heldout20.md). A constructor taking its list inline
keeps its own line; an optimizer holding everything is silent.

Real torch, in-process (runtime/trace/param_lists.py).
"""
from __future__ import annotations

import pytest
from rt_helpers import marked_line

HEAD = """
import torch
import torch.nn as nn

torch.manual_seed(0)
"""

BUGS = {
    # the list kept on self in __init__, the optimizer built from it on the next line
    "self_list_in_init": """
class Learner:
    def __init__(self):
        self.policy = nn.Linear(4, 2)
        self.critic = nn.Linear(4, 1)
        self.mixer = nn.Linear(2, 1)
        self.params = list(self.critic.parameters()) + list(self.mixer.parameters())  # <- cause
        self.opt = torch.optim.RMSprop(self.params, lr=0.01)

    def learn(self, x):
        loss = self.mixer(self.policy(x)).mean() + self.critic(x).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()


learner = Learner()
for _ in range(2):
    learner.learn(torch.randn(8, 4))
""",
    # a local list built by a comprehension over modules, in the training function
    "local_list_in_function": """
encoder, decoder, head = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 1)


def train(batches):
    params = [p for m in (encoder, head) for p in m.parameters()]  # <- cause
    opt = torch.optim.SGD(params, lr=0.1)
    for x in batches:
        loss = head(decoder(encoder(x))).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


train([torch.randn(8, 4) for _ in range(2)])
""",
    # the constructor takes its list inline: its own line is where the fix goes
    "inline_list": """
encoder, decoder = nn.Linear(4, 4), nn.Linear(4, 1)
opt = torch.optim.Adam(list(encoder.parameters()), lr=0.1)  # <- cause
for _ in range(2):
    loss = decoder(encoder(torch.randn(8, 4))).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
}

LOOKALIKES = {
    "list_holds_every_model": """
encoder, decoder = nn.Linear(4, 4), nn.Linear(4, 1)
params = list(encoder.parameters()) + list(decoder.parameters())
opt = torch.optim.Adam(params, lr=0.1)
for _ in range(2):
    loss = decoder(encoder(torch.randn(8, 4))).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
}


def _run_findings(res):
    return [f for f in res.findings if f["source"] != "static"]


@pytest.mark.parametrize("name", sorted(BUGS))
def test_left_out_parameters_named_where_the_list_is_made(run_script, name):
    src = HEAD + BUGS[name]
    res = run_script(src)
    found = [f for f in _run_findings(res) if f["code"] == "GT821"]
    assert found, res.err
    assert found[0]["line"] == marked_line(src), res.err


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_optimizer_holding_every_model_is_silent(run_script, name):
    res = run_script(HEAD + LOOKALIKES[name])
    assert res.code == 0, res.err
    assert _run_findings(res) == [], res.err


# ---- a backward seed of the wrong shape, scaled before use (held-out 20's WaveGAN case) ------
# `neg_one = one * -1` keeps `one`'s shape: the fix changes `one`'s line.

SEED_BUGS = {
    "scaled_by_number": """
net = nn.Linear(4, 1)
one = torch.ones(1)  # <- cause
neg_one = one * -1
out = net(torch.randn(8, 4)).mean()
out.backward(neg_one)
""",
    "negated_then_doubled": """
net = nn.Linear(4, 1)
def step(x):
    seed = torch.FloatTensor([1])  # <- cause
    minus = -seed
    twice = 2.0 * minus
    net(x).mean().backward(twice)
step(torch.randn(8, 4))
""",
    # a seed computed from a tensor (not a number): its own line is where its shape is made
    "computed_from_tensor": """
net = nn.Linear(4, 1)
scale = torch.ones(1)
seed = scale * torch.ones(3)  # <- cause
net(torch.randn(8, 4)).mean().backward(seed)
""",
}
SEED_LOOKALIKES = {
    "scalar_seeds": """
net = nn.Linear(4, 1)
one = torch.tensor(1.0)
neg_one = one * -1
out = net(torch.randn(8, 4)).mean()
out.backward(neg_one)
""",
}


@pytest.mark.parametrize("name", sorted(SEED_BUGS))
def test_wrong_shape_seed_named_where_its_shape_is_made(run_script, name):
    src = HEAD + SEED_BUGS[name]
    res = run_script(src)
    assert res.code != 0, res.err  # real torch: Mismatch in shape
    found = [f for f in _run_findings(res) if f["code"] == "GT830"]
    assert found and found[0]["line"] == marked_line(src), res.err


@pytest.mark.parametrize("name", sorted(SEED_LOOKALIKES))
def test_scalar_seed_is_silent(run_script, name):
    res = run_script(HEAD + SEED_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert _run_findings(res) == [], res.err


# ---- the run's GT845 (a Function's backward returns None for an input that needs grad) is the
# static GT718 confirmed: one finding, its line the `needs_input_grad` test of the wrong input --

GUARDED = """
class Mix(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        da = db = None
        if ctx.needs_input_grad[0]:  # <- cause
            da = g * b
            db = g * a
        return da, db


x = torch.randn(4, requires_grad=True)
w = nn.Parameter(torch.randn(4))
opt = torch.optim.SGD([w], lr=0.1)
loss = Mix.apply(x.detach(), w).sum()
opt.zero_grad()
loss.backward()
opt.step()
"""


def test_function_guard_is_one_fused_finding(run_script):
    src = HEAD + GUARDED
    res = run_script(src)
    first = _run_findings(res)[0]
    assert first["code"] == "GT845", res.err
    assert first["line"] == marked_line(src), res.err
    assert first["source"] == "static+runtime", res.err
    assert any("GT718" in r["message"] for r in first["related"]), res.err


# ---- messages: a name standing for several tensors is counted, not repeated; a list rebuilt
# with torch.tensor(...) is fixed with torch.stack, not .clone() --------------------------------

def test_listed_counts_repeated_names_and_the_rest():
    from gradtrace.runtime.build import listed

    assert listed(["Emb.weight", "Emb.weight", "Lin.bias"]) == "Emb.weight (2 tensors), Lin.bias"
    assert listed([f"p{i}" for i in range(8)]) == "p0, p1, p2, p3, p4, p5 and 2 more"


REBUILT_LIST = """
policy = nn.Linear(4, 2)
opt = torch.optim.SGD(policy.parameters(), lr=0.1)
log_probs = []
for _ in range(3):
    dist = torch.distributions.Categorical(logits=policy(torch.randn(4)))
    log_probs.append(dist.log_prob(dist.sample()))
lp = torch.tensor(log_probs, requires_grad=True)  # <- cause
loss = -(lp * torch.ones(3)).sum()
opt.zero_grad()
loss.backward()
opt.step()
"""


def test_list_rebuilt_into_a_leaf_is_fixed_with_stack(run_script):
    src = HEAD + REBUILT_LIST
    res = run_script(src)
    found = [f for f in _run_findings(res) if f["code"] == "GT104"]
    assert found and found[0]["line"] == marked_line(src), res.err
    fix = found[0]["fix"] if isinstance(found[0]["fix"], str) else str(found[0]["fix"])
    assert "torch.stack" in fix and ".clone()" not in fix, fix
