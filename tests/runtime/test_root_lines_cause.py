"""`gradtrace run` names the line the user changes, not the symptom's (issue 13 §2, held-out
batch 4): the constructor of a layer built with `inplace=True` whose call wrote into a saved
tensor (not the call); a class whose layers never became attributes (a misnamed constructor,
layers bound to locals: the static GT444 leads the empty-optimizer crash); a loss attribute
built once in `__init__` by a helper method (the static GT521 leads the in-place error of the
step); the optimizer that takes part of a model and not the part the loss also runs, when
several optimizers step (not the use of the part left out); a zero_grad() on one branch of an
`if` whose other branch also runs backward() before the shared step (the static GT523 leads
the runtime's accumulation); an in-place update of an inference tensor after its
`inference_mode()` block by an augmented assignment (the update, not the block); a helper writing in place into the
Parameter it was handed (the call that hands it over, not the write); a non-scalar loss at
the `.mean(dim)` that kept a dimension (not the caller's sum of terms); an op run under two
`no_grad` blocks is cut by the one that was on when the trained value was made (not the first
block it ever ran under). Each bug in a spelling of its own from the real-world case that motivated it, with a
look-alike that stays silent. Real torch, in-process runs."""
from __future__ import annotations

import pytest

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F
"""

# name -> (code, body, static checks on); the cause line carries `# C`
BUGS = {
    "leaky_inplace_attribute_after_sigmoid": ("GT602", """
class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = nn.LeakyReLU(0.1, inplace=True)  # C

    def forward(self, x):
        h = torch.sigmoid(self.fc(x))
        return self.act(h)

Gate()(torch.randn(2, 4)).sum().backward()
""", False),
    "inplace_relu_inside_sequential_after_tanh": ("GT602", """
head = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.ReLU(inplace=True))  # C
out = head(torch.randn(5, 3))
out.mean().backward()
""", False),
    # an in-place layer that rewrites the output of another in-place activation, whose node
    # torch names with its overload digit ("output 0 of LeakyRelu1", held-out 8's pix2pix
    # discriminator): the second layer's constructor
    "elu_inplace_then_dropout_inplace_in_sequential": ("GT602", """
block = nn.Sequential(nn.Conv1d(2, 4, 3), nn.ELU(inplace=True),
                      nn.Dropout(0.3, inplace=True),  # C
                      nn.Flatten(), nn.Linear(4 * 6, 1))
block(torch.randn(3, 2, 8)).sum().backward()
""", False),
    "leaky_inplace_then_dropout_inplace_attributes": ("GT602", """
class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 5)
        self.act = nn.LeakyReLU(0.2, inplace=True)
        self.drop = nn.Dropout(0.5, inplace=True)  # C

    def forward(self, x):
        return self.drop(self.act(self.fc(x)))

Head()(torch.randn(4, 5)).pow(2).sum().backward()
""", False),
    "constructor_misspelt_double_underscore": ("GT444", """
class Scorer(nn.Module):
    def __int__(self):  # C
        super().__int__()
        self.body = nn.Linear(6, 1)

    def forward(self, x):
        return self.body(x)

net = Scorer()
opt = torch.optim.Adam(net.parameters())
""", True),
    "layers_kept_in_locals_of_init": ("GT444", """
class TwoTower(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.d = d
        user_tower = nn.Linear(d, 4)  # C
        item_tower = nn.Linear(d, 4)

    def forward(self, u, i):
        return (self.user_tower(u) * self.item_tower(i)).sum(-1)

model = TwoTower(3)
sgd = torch.optim.SGD(model.parameters(), lr=0.1)
""", True),
    "penalty_attribute_built_by_helper_in_init": ("GT521", """
class Ranker(nn.Module):
    def __init__(self):
        super().__init__()
        self.score = nn.Linear(4, 1)
        self.attach_penalty(list(self.score.parameters()), 1e-3)  # C

    def attach_penalty(self, tensors, coef):
        acc = 0.0
        for t in tensors:
            acc = acc + t.abs().sum()
        self.penalty = coef * acc

    def forward(self, x):
        return self.score(x).squeeze(-1)

model = Ranker()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    loss = F.mse_loss(model(torch.randn(3, 4)), torch.randn(3)) + model.penalty
    opt.zero_grad()
    loss.backward(retain_graph=True)
    opt.step()
""", True),
    "optimizer_takes_trunk_only_of_two_part_model": ("GT821", """
class Body(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Linear(4, 4)
        self.head = nn.Linear(4, 1)

    def forward(self, x):
        return self.head(torch.relu(self.trunk(x)))

body, critic = Body(), nn.Linear(1, 1)
opt_body = torch.optim.SGD(body.trunk.parameters(), lr=0.1)  # C
opt_critic = torch.optim.SGD(critic.parameters(), lr=0.1)
for _ in range(3):
    loss = critic(body(torch.randn(2, 4))).pow(2).mean()
    opt_body.zero_grad()
    opt_critic.zero_grad()
    loss.backward()
    opt_body.step()
    opt_critic.step()
""", False),
    "model_cleared_on_teacher_forcing_branch_only": ("GT523", """
class Trainer:
    def __init__(self):
        self.net = nn.Linear(3, 3)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.05)

    def fit(self, data):
        for i, (x, y) in enumerate(data):
            if i % 2:
                out = self.net(x)
                F.mse_loss(out, y).backward()
            else:
                self.net.zero_grad()  # C
                F.mse_loss(self.net(y), y).backward()
            self.opt.step()

Trainer().fit([(torch.randn(4, 3), torch.randn(4, 3)) for _ in range(6)])
""", True),
    "inference_hits_scaled_by_augmented_assignment": ("GT204", """
class Evaluator:
    def __init__(self, net):
        self.net = net

    def hit_rate(self, batches):
        hits = 0
        with torch.inference_mode():
            for x, y in batches:
                hits += (self.net(x).argmax(1) == y).float().sum()
        hits *= 100.0 / (4 * len(batches))  # C
        return hits.item()

Evaluator(nn.Linear(3, 2)).hit_rate([(torch.randn(4, 3), torch.randint(0, 2, (4,)))] * 2)
""", False),
    "init_helper_fills_parameter_argument": ("GT302", """
def fan_in_uniform(w, scale):
    bound = scale / w.shape[1] ** 0.5
    w.uniform_(-bound, bound)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.empty(3, 4))
        fan_in_uniform(self.w, scale=1.0)  # C

    def forward(self, x):
        return x @ self.w.t()

Net()(torch.randn(2, 4)).sum().backward()
""", False),
    "loss_module_returns_per_row_mean": ("GT510", """
class PairLoss(nn.Module):
    def forward(self, a, b):
        return (a - b).pow(2).mean(dim=1)  # C

enc = nn.Linear(4, 3)
crit = PairLoss()
x = torch.randn(5, 4)
loss = 0.5 * crit(enc(x), torch.randn(5, 3)) + 0.1
loss.backward()
""", False),
    "helper_run_under_two_no_grad_blocks": ("GT201", """
net = nn.Linear(3, 1)

def evaluate(x):
    return F.mse_loss(net(x), torch.zeros(4, 1))

for _ in range(2):
    with torch.no_grad():
        logged = evaluate(torch.randn(4, 3)).item()
    with torch.no_grad():  # C
        train_loss = evaluate(torch.randn(4, 3))
    train_loss.backward()
""", False),
}

LOOKALIKES = {
    "elu_inplace_then_dropout_out_of_place": """
block = nn.Sequential(nn.Conv1d(2, 4, 3), nn.ELU(inplace=True), nn.Dropout(0.3),
                      nn.Flatten(), nn.Linear(4 * 6, 1))
opt = torch.optim.SGD(block.parameters(), lr=0.1)
for _ in range(2):
    opt.zero_grad()
    block(torch.randn(3, 2, 8)).sum().backward()
    opt.step()
""",
    "inplace_relu_after_linear": """
head = nn.Sequential(nn.Linear(3, 3), nn.ReLU(inplace=True), nn.Linear(3, 1))
act = nn.LeakyReLU(0.1, inplace=True)
h = act(nn.Linear(2, 3)(torch.randn(4, 2)))
(head(torch.randn(5, 3)).mean() + h.sum()).backward()
""",
    "layers_locals_then_registered": """
class TwoTower(nn.Module):
    def __init__(self, d):
        super().__init__()
        user_tower = nn.Linear(d, 4)
        self.towers = nn.ModuleList([user_tower, nn.Linear(d, 4)])

    def forward(self, u, i):
        return (self.towers[0](u) * self.towers[1](i)).sum(-1)

model = TwoTower(3)
sgd = torch.optim.SGD(model.parameters(), lr=0.1)
loss = model(torch.randn(2, 3), torch.randn(2, 3)).sum()
sgd.zero_grad()
loss.backward()
sgd.step()
""",
    "two_optimizers_cover_both_parts": """
class Body(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Linear(4, 4)
        self.head = nn.Linear(4, 1)

    def forward(self, x):
        return self.head(torch.relu(self.trunk(x)))

body = Body()
opt_trunk = torch.optim.SGD(body.trunk.parameters(), lr=0.1)
opt_head = torch.optim.Adam(body.head.parameters(), lr=1e-3)
for _ in range(3):
    loss = body(torch.randn(2, 4)).pow(2).mean()
    opt_trunk.zero_grad()
    opt_head.zero_grad()
    loss.backward()
    opt_trunk.step()
    opt_head.step()
""",
    "cleared_on_both_branches": """
class Trainer:
    def __init__(self):
        self.net = nn.Linear(3, 3)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.05)

    def fit(self, data):
        for i, (x, y) in enumerate(data):
            if i % 2:
                self.opt.zero_grad()
                F.mse_loss(self.net(x), y).backward()
            else:
                self.net.zero_grad()
                F.mse_loss(self.net(y), y).backward()
            self.opt.step()

Trainer().fit([(torch.randn(4, 3), torch.randn(4, 3)) for _ in range(6)])
""",
    "inference_scores_rescaled_out_of_place": """
def evaluate(net, batches):
    net.eval()
    with torch.inference_mode():
        scores = torch.cat([net(x) for x in batches])
        scores.mul_(2.0)
    scores = scores.clamp(min=0.0) / len(batches)
    return scores.mean().item()

evaluate(nn.Linear(3, 2), [torch.randn(4, 3) for _ in range(2)])
""",
    "init_helper_fills_argument_without_grad": """
def fan_in_uniform(w, scale):
    bound = scale / w.shape[1] ** 0.5
    with torch.no_grad():
        w.uniform_(-bound, bound)

def fill_table(table):
    table[:] = torch.arange(table.numel()).view_as(table)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.empty(3, 4))
        self.register_buffer("pos", torch.empty(2, 3))
        fan_in_uniform(self.w, scale=1.0)
        fill_table(self.pos)

    def forward(self, x):
        return x @ self.w.t() + self.pos.sum()

Net()(torch.randn(2, 4)).sum().backward()
""",
    "loss_module_reduces_rows_then_batch": """
class PairLoss(nn.Module):
    def forward(self, a, b):
        return (a - b).pow(2).mean(dim=1)

enc = nn.Linear(4, 3)
crit = PairLoss()
loss = 0.5 * crit(enc(torch.randn(5, 4)), torch.randn(5, 3)).mean() + 0.1
loss.backward()
""",
    "helper_logged_under_no_grad_then_trained": """
net = nn.Linear(3, 1)

def evaluate(x):
    return F.mse_loss(net(x), torch.zeros(4, 1))

for _ in range(2):
    with torch.no_grad():
        logged = evaluate(torch.randn(4, 3)).item()
    train_loss = evaluate(torch.randn(4, 3))
    train_loss.backward()
""",
    "penalty_recomputed_by_helper_each_step": """
class Ranker(nn.Module):
    def __init__(self):
        super().__init__()
        self.score = nn.Linear(4, 1)
        self.attach_penalty(list(self.score.parameters()), 1e-3)

    def attach_penalty(self, tensors, coef):
        self.tensors, self.coef = tensors, coef

    def penalty(self):
        return self.coef * sum(t.abs().sum() for t in self.tensors)

    def forward(self, x):
        return self.score(x).squeeze(-1)

model = Ranker()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    loss = F.mse_loss(model(torch.randn(3, 4)), torch.randn(3)) + model.penalty()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_cause_line_named_first(tmp_path, name):
    import runpy

    import gradtrace

    code, body, static = BUGS[name]
    src = (HEAD + body).lstrip("\n")
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))
    path = tmp_path / f"{name}.py"
    path.write_text(src, encoding="utf-8")
    tr = gradtrace.trace(static=static)
    try:
        with tr:
            runpy.run_path(str(path))
        found = tr.findings
    except Exception as exc:  # noqa: BLE001 - the crash bugs raise
        found = tr.diagnose(exc)
    assert found, tr.findings
    assert (found[0].code, found[0].line) == (code, line), found


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalike_silent(run_script, name):
    res = run_script((HEAD + LOOKALIKES[name]).lstrip("\n"))
    assert res.code == 0 and res.findings == [], res.err
