"""`gradtrace run` leads with the statement the fix changes (issue 13 §2, held-out batch 6):
a trainable module called inside a `no_grad` block that is there for a frozen module (the
call, not the block's opener); a layer built with `inplace=True` applied to a tensor that an
earlier op of the same function read and saved (the application, not the constructor; a layer
writing into the output its producer saved keeps the constructor: test_root_lines_cause); the
step of one optimizer while the parameters the loss trains are held by another that never
steps (the step, not the construction); a parameter cut off the loss while the program keeps a
`.detach().clone()` snapshot of it (the cut on the loss's path, not the snapshot); steps that
never change anything because the loss reaches the parameters through `round`/`floor`/`sign`
(the op, not the step); the same loss handed twice to a helper that runs backward() on it (the
second call, not the helper's backward or the loss). Each bug in a spelling of its own from the real-world case that
motivated it, with a look-alike that stays silent and the form whose line stays where it was.
Real torch, in-process runs."""
from __future__ import annotations

import pytest

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F
"""

# name -> (code, body); the line the finding must lead with carries `# C`
BUGS = {
    # a function, not a method; the frozen part frozen with requires_grad_(False); the live
    # branch keeps backward() running (silent)
    "adapter_called_in_block_kept_for_frozen_encoder": ("GT201", """
encoder = nn.Linear(5, 5).requires_grad_(False)
adapter = nn.Linear(5, 3)
vision = nn.Linear(4, 3)
opt = torch.optim.SGD([*adapter.parameters(), *vision.parameters()], lr=0.1)

def text_side(tokens):
    with torch.no_grad():
        feats = torch.tanh(encoder(tokens))
        return adapter(feats)  # C

for _ in range(3):
    loss = (vision(torch.randn(6, 4)) * text_side(torch.randn(6, 5))).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""),
    # a Lightning-style step method; the frozen teacher is a Sequential frozen by a loop
    "student_head_inside_teacher_block_of_step": ("GT201", """
class Distiller(nn.Module):
    def __init__(self):
        super().__init__()
        self.teacher = nn.Sequential(nn.Linear(6, 6), nn.ReLU())
        for p in self.teacher.parameters():
            p.requires_grad = False
        self.bridge = nn.Linear(6, 2)
        self.student = nn.Linear(6, 2)

    def training_step(self, batch):
        with torch.no_grad():
            target = self.teacher(batch)
            target = self.bridge(target)  # C
        return F.mse_loss(self.student(batch), target) + self.student(batch).pow(2).mean()

model = Distiller()
opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
for _ in range(3):
    loss = model.training_step(torch.randn(8, 6))
    opt.zero_grad()
    loss.backward()
    opt.step()
"""),
    # no frozen module in the block: the block itself is the mistake, its opener leads
    "whole_branch_under_no_grad_keeps_opener": ("GT201", """
left = nn.Linear(3, 2)
right = nn.Linear(3, 2)
sgd = torch.optim.SGD([*left.parameters(), *right.parameters()], lr=0.1)
for _ in range(3):
    x = torch.randn(5, 3)
    with torch.no_grad():  # C
        r = right(x)
    loss = (left(x) + r).pow(2).mean()
    sgd.zero_grad()
    loss.backward()
    sgd.step()
"""),
    # the skip branch reads the input first, then the in-place activation overwrites it
    "relu_inplace_applied_after_shortcut_read_input": ("GT602", """
class Stem(nn.Module):
    def __init__(self):
        super().__init__()
        self.entry = nn.Linear(4, 4)
        self.shortcut = nn.Linear(4, 4)
        self.nonlin = nn.ReLU(inplace=True)
        self.body = nn.Linear(4, 4)

    def forward(self, h):
        h = self.entry(h)
        skip = self.shortcut(h)
        h = self.nonlin(h)  # C
        return self.body(h) + skip

net = Stem()
net(torch.randn(3, 4)).sum().backward()
"""),
    # plain functions and module-level layers; the reader is a matmul, the layer a ReLU6
    "relu6_inplace_after_matmul_in_helper": ("GT602", """
clip = nn.ReLU6(inplace=True)
first = nn.Linear(5, 5)
gate = torch.randn(5, 5, requires_grad=True)

def mix(x):
    z = first(x)
    mixed = z @ gate
    z = clip(z)  # C
    return mixed + z

mix(torch.randn(2, 5)).pow(2).mean().backward()
"""),
    # a function; the critic's optimizer steps, the actor's (which the loss trains) never does
    "critic_stepped_where_actor_optimizer_meant": ("GT821", """
actor = nn.Linear(4, 2)
critic = nn.Linear(2, 1).requires_grad_(False)
actor_opt = torch.optim.Adam(actor.parameters(), lr=1e-2)
critic_opt = torch.optim.Adam(critic.parameters(), lr=1e-2)

def update(batch):
    actor_opt.zero_grad()
    score = critic(actor(batch)).mean()
    (-score).backward()
    critic_opt.step()  # C

for _ in range(3):
    update(torch.randn(5, 4))
"""),
    # a step method of a class; two optimizers on attributes
    "second_optimizer_stepped_in_step_method": ("GT821", """
class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(3, 3)
        self.aux = nn.Linear(3, 1)
        self.opt_body = torch.optim.SGD(self.body.parameters(), lr=0.1)
        self.opt_aux = torch.optim.SGD(self.aux.parameters(), lr=0.1)

    def training_step(self, x):
        self.opt_body.zero_grad()
        self.opt_aux.zero_grad()
        loss = self.body(x).pow(2).mean() + self.aux(x).mean()
        loss.backward()
        self.opt_aux.step()  # C

p = Pair()
for _ in range(3):
    p.training_step(torch.randn(4, 3))
"""),
    # a dict of snapshots taken before a training function whose encoder output is detached
    "encoder_detached_while_weights_snapshotted": ("GT107", """
enc, head = nn.Linear(4, 4), nn.Linear(4, 1)
opt = torch.optim.SGD([*enc.parameters(), *head.parameters()], lr=0.1)
snap = {n: p.detach().clone() for n, p in enc.named_parameters()}

def train(x, y):
    z = enc(x).detach()  # C
    loss = F.mse_loss(head(z), y)
    opt.zero_grad()
    loss.backward()
    opt.step()

for _ in range(3):
    train(torch.randn(6, 4), torch.randn(6, 1))
"""),
    # a step method; the snapshot is an attribute; the cut is an argmax of the logits
    "argmax_cut_while_step_keeps_reference_copy": ("GT108", """
class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.scorer = nn.Linear(5, 3)
        self.bias_head = nn.Linear(5, 1)
        self.reference = self.scorer.weight.detach().clone()

    def training_step(self, x, y):
        picked = self.scorer(x).argmax(1).float()  # C
        return ((picked - y) ** 2).mean() + self.bias_head(x).pow(2).mean()

m = Tagger()
opt = torch.optim.Adam(m.parameters(), lr=1e-2)
for _ in range(3):
    loss = m.training_step(torch.randn(4, 5), torch.randn(4))
    opt.zero_grad()
    loss.backward()
    opt.step()
"""),
    # the detach of the weight itself in forward, no other cut: it still leads
    "weight_detached_in_forward_alone": ("GT107", """
class Frozenish(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3, 3))
        self.out = nn.Linear(3, 1)

    def forward(self, x):
        return self.out(F.linear(x, self.w.detach()))  # C

net = Frozenish()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    net(torch.randn(2, 3)).sum().backward()
    opt.step()
"""),
    # a helper quantises the output with floor; Adam
    "output_floored_in_predict_helper": ("GT828", """
net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
adam = torch.optim.Adam(net.parameters(), lr=1e-2)

def predict(x):
    return torch.floor(net(x) * 4) / 4  # C

x, y = torch.randn(16, 3), torch.randn(16, 1)
for _ in range(20):
    loss = F.l1_loss(predict(x), y)
    adam.zero_grad()
    loss.backward()
    adam.step()
"""),
    # a step method; the sign of a score is compared with +-1 labels
    "sign_of_score_in_step_method": ("GT828", """
class Voter(nn.Module):
    def __init__(self):
        super().__init__()
        self.score = nn.Linear(5, 1)

    def step_loss(self, x, y):
        vote = self.score(x).sign()  # C
        return (vote - y).pow(2).mean()

v = Voter()
sgd = torch.optim.SGD(v.parameters(), lr=0.1)
x, y = torch.randn(12, 5), torch.randint(0, 2, (12, 1)).float() * 2 - 1
for _ in range(20):
    sgd.zero_grad()
    v.step_loss(x, y).backward()
    sgd.step()
"""),
    # plain functions: the loss helper backpropagates inside, and the loop does it again
    "loss_helper_backpropagates_then_loop_again": ("GT509", """
net = nn.Linear(3, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)

def apply_grads(value):
    value.backward()

def compute(x):
    loss = net(x).pow(2).mean()
    apply_grads(loss)
    return loss

for _ in range(2):
    opt.zero_grad()
    loss = compute(torch.randn(4, 3))
    apply_grads(loss)  # C
    opt.step()
"""),
    # an engine object whose backward method a step method calls, then the trainer again
    "engine_backward_called_by_step_and_trainer": ("GT509", """
class Engine:
    def __init__(self, params):
        self.opt = torch.optim.Adam(params, lr=1e-3)

    def backward(self, loss):
        loss.backward()

class Module(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def training_step(self, engine, x):
        out = self.fc(x).logsumexp(-1).mean()
        engine.backward(out)
        return out

m = Module()
engine = Engine(m.parameters())
for _ in range(2):
    out = m.training_step(engine, torch.randn(3, 4))
    engine.backward(out)  # C
    engine.opt.step()
"""),
    # the loss is made once in the function that backpropagates it: GT507 keeps its line
    "loss_made_before_loop_in_function": ("GT507", """
net = nn.Linear(3, 1)

def train(x):
    loss = net(x).pow(2).mean()  # C
    for _ in range(2):
        loss.backward()

train(torch.randn(4, 3))
"""),
}

LOOKALIKES = {
    # the helper runs backward() once per loss
    "loss_helper_backpropagates_once": """
net = nn.Linear(3, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)

def apply_grads(value):
    value.backward()

def compute(x):
    loss = net(x).pow(2).mean()
    apply_grads(loss)
    return loss

for _ in range(2):
    opt.zero_grad()
    loss = compute(torch.randn(4, 3))
    opt.step()
""",
    # the straight-through estimator: rounded forward, identity gradient
    "rounded_output_with_straight_through": """
net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
adam = torch.optim.Adam(net.parameters(), lr=1e-2)

def predict(x):
    out = net(x) * 4
    return (out + (torch.floor(out) - out).detach()) / 4

x, y = torch.randn(16, 3), torch.randn(16, 1)
for _ in range(20):
    loss = F.l1_loss(predict(x), y)
    adam.zero_grad()
    loss.backward()
    adam.step()
""",
    # the snapshot, and a loss that reaches every parameter
    "weights_snapshotted_and_all_trained": """
enc, head = nn.Linear(4, 4), nn.Linear(4, 1)
opt = torch.optim.SGD([*enc.parameters(), *head.parameters()], lr=0.1)
snap = {n: p.detach().clone() for n, p in enc.named_parameters()}

def train(x, y):
    loss = F.mse_loss(head(enc(x)), y)
    opt.zero_grad()
    loss.backward()
    opt.step()

for _ in range(3):
    train(torch.randn(6, 4), torch.randn(6, 1))
assert not torch.equal(snap["weight"], enc.weight)
""",
    # each optimizer steps what its own loss trains
    "each_optimizer_steps_its_network": """
actor = nn.Linear(4, 2)
critic = nn.Linear(2, 1)
actor_opt = torch.optim.Adam(actor.parameters(), lr=1e-2)
critic_opt = torch.optim.Adam(critic.parameters(), lr=1e-2)

def update(batch, target):
    actor_opt.zero_grad()
    critic_opt.zero_grad()
    score = critic(actor(batch)).mean()
    (score - target).pow(2).backward()
    critic_opt.step()
    actor_opt.step()

for _ in range(3):
    update(torch.randn(5, 4), 1.0)
""",
    # the in-place activation first, the reader after it: nothing saved is overwritten
    "relu_inplace_applied_before_shortcut_reads": """
class Stem(nn.Module):
    def __init__(self):
        super().__init__()
        self.entry = nn.Linear(4, 4)
        self.shortcut = nn.Linear(4, 4)
        self.nonlin = nn.ReLU(inplace=True)
        self.body = nn.Linear(4, 4)

    def forward(self, h):
        h = self.nonlin(self.entry(h))
        skip = self.shortcut(h)
        return self.body(h) + skip

net = Stem()
net(torch.randn(3, 4)).sum().backward()
""",
    # the frozen encoder alone under no_grad, the trainable adapter after the block
    "adapter_called_after_block_of_frozen_encoder": """
encoder = nn.Linear(5, 5).requires_grad_(False)
adapter = nn.Linear(5, 3)
vision = nn.Linear(4, 3)
opt = torch.optim.SGD([*adapter.parameters(), *vision.parameters()], lr=0.1)

def text_side(tokens):
    with torch.no_grad():
        feats = torch.tanh(encoder(tokens))
    return adapter(feats)

for _ in range(3):
    loss = (vision(torch.randn(6, 4)) * text_side(torch.randn(6, 5))).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
}


def _findings(tmp_path, name: str, src: str) -> list:
    import runpy

    import gradtrace

    path = tmp_path / f"{name}.py"
    path.write_text(src, encoding="utf-8")
    tr = gradtrace.trace(static=False)
    try:
        with tr:
            runpy.run_path(str(path))
        return list(tr.findings)
    except Exception as exc:  # noqa: BLE001 - the crash bugs raise
        return list(tr.diagnose(exc))


@pytest.mark.parametrize("name", sorted(BUGS))
def test_fix_line_named_first(tmp_path, name):
    code, body = BUGS[name]
    src = (HEAD + body).lstrip("\n")
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))
    found = _findings(tmp_path, name, src)
    assert found
    assert (found[0].code, found[0].line) == (code, line), found


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalike_silent(run_script, name):
    res = run_script((HEAD + LOOKALIKES[name]).lstrip("\n"))
    assert res.code == 0 and res.findings == [], res.err
