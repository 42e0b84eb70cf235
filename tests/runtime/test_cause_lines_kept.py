"""`gradtrace run` names the cause's line for values kept or rebuilt outside the graph, gradients
erased before the step, and swapped optimizers (issue 13 §2); real torch, tiny models. Each bug
has a correct look-alike that must stay silent."""
from __future__ import annotations

import pytest

HEAD = """
import copy
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical
torch.manual_seed(0)
"""

# name -> (code, body); the cause line carries `# C`
BUGS = {
    # REINFORCE: the numbers of .item() are stored in a list that torch.tensor() rebuilds
    "item_appended_then_rebuilt": ("GT102", """
class Agent:
    def __init__(self):
        self.policy = nn.Linear(4, 3)
        self.probs = []

    def act(self, obs):
        p = torch.softmax(self.policy(obs), dim=-1)
        a = int(p.argmax())
        self.probs.append(p[a].item())  # C
        return a

    def finish(self, rewards):
        pi = torch.tensor(self.probs)
        return -(torch.tensor(rewards) * torch.log(pi)).sum()

agent = Agent()
for t in range(4):
    agent.act(torch.randn(4))
agent.finish([1.0, 0.0, 1.0, 0.5]).backward()
"""),
    # A3C: a list of log-prob tensors turned into a new tensor; the critic term still trains
    "tensor_of_grad_tensors": ("GT102", """
actor, critic = nn.Linear(4, 2), nn.Linear(4, 1)
opt = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=1e-3)
memory = []
for t in range(5):
    s = torch.randn(4)
    dist = Categorical(torch.softmax(actor(s), dim=-1))
    a = dist.sample()
    memory.append((s, dist.log_prob(a), float(t % 2)))
def learn(memory):
    states = torch.stack([m[0] for m in memory])
    log_probs = torch.tensor([m[1] for m in memory])  # C
    adv = torch.tensor([m[2] for m in memory]) - critic(states).squeeze(1)
    loss = -(log_probs * adv.detach()).mean() + adv.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
learn(memory)
learn(memory)
"""),
    # loss tensors kept in a history list, converted to numpy for a plot
    "numpy_of_history_list": ("GT807", """
model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
history = {"loss": []}
def train_epoch():
    loss = model(torch.randn(4, 3)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss
for epoch in range(2):
    history["loss"].append(train_epoch())  # C
curve = np.array(history["loss"])
"""),
    # an evaluation helper returns its loss with the graph; numpy sums the weighted losses
    "numpy_of_returned_loss": ("GT807", """
class Client:
    def __init__(self):
        self.model = nn.Linear(6, 3)
        self.data = (torch.randn(5, 6), torch.randint(0, 3, (5,)))

    def evaluate(self):
        x, y = self.data
        return F.cross_entropy(self.model(x), y), len(y)  # C

stats = [c.evaluate() for c in [Client(), Client()]]
total = np.sum([n * loss for loss, n in stats])
"""),
    # BYOL-style trainer: the gradients are cleared between backward() and step()
    "zero_grad_between_backward_and_step": ("GT503", """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.online = nn.Linear(8, 4)
        self.target = copy.deepcopy(self.online).requires_grad_(False)

    def forward(self, x):
        with torch.no_grad():
            t = self.target(x)
        return (self.online(x) - t).pow(2).mean()

def clear(opt):
    opt.zero_grad(set_to_none=False)  # C

net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    net(torch.randn(4, 8)).backward()
    clear(opt)
    opt.step()
"""),
    # two optimizers given each other's networks
    "optimizers_swapped": ("GT406", """
class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc, self.dec = nn.Linear(8, 8), nn.Linear(4, 8)

    def encode(self, x):
        mu, logvar = self.enc(x).chunk(2, dim=-1)
        return mu + torch.randn_like(mu) * torch.exp(0.5 * logvar), mu, logvar

vae = VAE()
opt_dec = torch.optim.Adam(vae.enc.parameters(), lr=1e-3)  # C
opt_enc = torch.optim.Adam(vae.dec.parameters(), lr=1e-3)
x = torch.randn(16, 8)
for _ in range(3):
    z, mu, logvar = vae.encode(x)
    (vae.dec(z.detach()) - x).pow(2).mean().backward()
    opt_dec.step()
    vae.zero_grad()
    z, mu, logvar = vae.encode(x)
    (torch.exp(logvar) + mu ** 2 - 1 - logvar).mean().backward()
    opt_enc.step()
    vae.zero_grad()
"""),
    # one term of a two-term loss detached: the run still trains through the other term
    "one_term_detached": ("GT107", """
netg = nn.Sequential(nn.Linear(8, 8), nn.Tanh())
netd = nn.Sequential(nn.Linear(8, 1), nn.Sigmoid())
opt_g = torch.optim.Adam(netg.parameters(), lr=2e-4)
for _ in range(2):
    x, gt = torch.randn(4, 8), torch.randn(4, 8)
    fake = netg(x)
    pred = netd(fake).detach()  # C
    err = F.binary_cross_entropy(pred, torch.ones(4, 1)) + 50 * F.l1_loss(fake, gt)
    opt_g.zero_grad()
    err.backward()
    opt_g.step()
"""),
    # the scheduler steps at the start of each epoch (a handler called before training)
    "scheduler_before_first_step": ("GT515", """
model = nn.Linear(8, 4)
opt = torch.optim.Adam(model.parameters(), lr=0.0035)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.1)
handlers = []
def on_epoch_start():
    sched.step()  # C
handlers.append(on_epoch_start)
for epoch in range(2):
    for h in handlers:
        h()
    for _ in range(2):
        opt.zero_grad()
        F.cross_entropy(model(torch.randn(4, 8)), torch.randint(0, 4, (4,))).backward()
        opt.step()
"""),
    # param groups listed by a base-class helper miss the layer a subclass adds
    "param_groups_miss_subclass_layer": ("GT821", """
class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.head = nn.Linear(8, 8), nn.Linear(8, 3)

    def param_groups(self, lr):
        return [{"params": self.body.parameters(), "lr": lr / 10},  # C
                {"params": self.head.parameters()}]

class Wider(Base):
    def __init__(self):
        super().__init__()
        self.extra = nn.Linear(8, 8)

    def forward(self, x):
        return self.head(torch.relu(self.extra(torch.relu(self.body(x)))))

def make_optimizer(model):
    return torch.optim.Adam(model.param_groups(1e-2), lr=1e-2)

model = Wider()
opt = make_optimizer(model)
for _ in range(3):
    opt.zero_grad()
    F.cross_entropy(model(torch.randn(16, 8)), torch.randint(0, 3, (16,))).backward()
    opt.step()
"""),
    # the twin of input_optimized_through_fixed_net: a Parameter is trained, the layer is not
    "layer_left_out_beside_a_parameter": ("GT821", """
net = nn.Linear(8, 8)
w = nn.Parameter(torch.randn(8, 2))
opt = torch.optim.Adam([w], lr=0.1)  # C
for _ in range(3):
    opt.zero_grad()
    F.cross_entropy(net(torch.randn(4, 8)) @ w, torch.tensor([0, 1, 0, 1])).backward()
    opt.step()
"""),
}

BUGS["loop_variable_rebound_by_update"] = ("GT301", """
fc = nn.Linear(4, 1)
for it in range(5):
    fc.zero_grad()
    F.mse_loss(fc(torch.randn(8, 4)), torch.zeros(8, 1)).backward()
    for param in fc.parameters():
        param = param - 0.1 * param.grad  # C
""")

# the optimizer never steps (a hand-written update replaced it): torch's "scheduler before
# optimizer" warning is a consequence, not the cause
BUGS["rebound_update_beside_a_scheduler"] = ("GT301", """
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1)
for epoch in range(2):
    for it in range(2):
        opt.zero_grad()
        F.mse_loss(model(torch.randn(8, 4)), torch.zeros(8, 1)).backward()
        for p in model.parameters():
            p = p - 0.1 * p.grad  # C
    sched.step()
""")

LOOKALIKES = {
    # the optimizer trains an input through a fixed network (dataset distillation, adversarial
    # examples): the network's weights get gradients that no optimizer is meant to apply
    "input_optimized_through_fixed_net": """
net = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
x = (torch.randn(4, 8) * 0.1).requires_grad_(True)
opt_x = torch.optim.Adam([x], lr=0.1)
for _ in range(3):
    opt_x.zero_grad()
    F.cross_entropy(net(x), torch.tensor([0, 1, 0, 1])).backward()
    opt_x.step()
""",
    # the head's optimizer steps during a warm-up in which the head is frozen
    "frozen_part_stepped_in_warmup": """
body, head = nn.Linear(8, 8), nn.Linear(8, 3).requires_grad_(False)
opt_body = torch.optim.SGD(body.parameters(), lr=0.1)
opt_head = torch.optim.SGD(head.parameters(), lr=0.1)
for _ in range(3):
    opt_body.zero_grad()
    opt_head.zero_grad()
    F.cross_entropy(head(torch.relu(body(torch.randn(4, 8)))), torch.randint(0, 3, (4,))).backward()
    opt_body.step()
    opt_head.step()
""",
    "param_groups_extended_by_subclass": """
class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.head = nn.Linear(8, 8), nn.Linear(8, 3)

    def param_groups(self, lr):
        return [{"params": self.body.parameters(), "lr": lr / 10},
                {"params": self.head.parameters()}]

class Wider(Base):
    def __init__(self):
        super().__init__()
        self.extra = nn.Linear(8, 8)

    def param_groups(self, lr):
        return super().param_groups(lr) + [{"params": self.extra.parameters()}]

    def forward(self, x):
        return self.head(torch.relu(self.extra(torch.relu(self.body(x)))))

model = Wider()
opt = torch.optim.Adam(model.param_groups(1e-2), lr=1e-2)
for _ in range(3):
    opt.zero_grad()
    F.cross_entropy(model(torch.randn(16, 8)), torch.randint(0, 3, (16,))).backward()
    opt.step()
""",
    "scheduler_after_step": """
model = nn.Linear(8, 4)
opt = torch.optim.Adam(model.parameters(), lr=0.0035)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.1)
def on_epoch_end():
    sched.step()
for epoch in range(2):
    for _ in range(2):
        opt.zero_grad()
        F.cross_entropy(model(torch.randn(4, 8)), torch.randint(0, 4, (4,))).backward()
        opt.step()
    on_epoch_end()
""",
    "item_appended_for_logging": """
policy = nn.Linear(4, 3)
opt = torch.optim.SGD(policy.parameters(), lr=0.1)
log_probs, probs = [], []
for t in range(4):
    p = torch.softmax(policy(torch.randn(4)), dim=-1)
    a = int(p.argmax())
    probs.append(p[a].item())
    log_probs.append(torch.log(p[a]))
returns = torch.tensor([1.0, 0.0, 1.0, 0.5])
shown = torch.tensor(probs)
loss = -(returns * torch.stack(log_probs)).sum()
opt.zero_grad()
loss.backward()
opt.step()
""",
    "stacked_log_probs_with_distribution": """
actor = nn.Linear(4, 2)
opt = torch.optim.Adam(actor.parameters(), lr=1e-3)
for _ in range(2):
    log_probs = []
    for t in range(5):
        dist = Categorical(torch.softmax(actor(torch.randn(4)), dim=-1))
        log_probs.append(dist.log_prob(dist.sample()))
    loss = -torch.stack(log_probs).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    "history_of_numbers": """
model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
history = {"loss": []}
for epoch in range(2):
    loss = model(torch.randn(4, 3)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    history["loss"].append(loss.item())
curve = np.array(history["loss"])
""",
    "returned_loss_item": """
class Client:
    def __init__(self):
        self.model = nn.Linear(6, 3)
        self.data = (torch.randn(5, 6), torch.randint(0, 3, (5,)))

    def evaluate(self):
        x, y = self.data
        with torch.no_grad():
            return F.cross_entropy(self.model(x), y), len(y)

stats = [c.evaluate() for c in [Client(), Client()]]
total = np.sum([n * loss for loss, n in stats])
""",
    # a GAN generator step clears the discriminator's gradients its backward left behind
    "other_networks_grads_cleared": """
g, d = nn.Linear(4, 4), nn.Linear(4, 1)
opt_g = torch.optim.SGD(g.parameters(), lr=0.1)
opt_d = torch.optim.SGD(d.parameters(), lr=0.1)
for _ in range(3):
    opt_d.zero_grad()
    fake = g(torch.randn(8, 4))
    d(fake.detach()).mean().backward()
    opt_d.step()
    opt_g.zero_grad()
    (-d(fake).mean()).backward()
    opt_d.zero_grad()
    opt_g.step()
""",
    "optimizers_matched": """
class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc, self.dec = nn.Linear(8, 8), nn.Linear(4, 8)

    def encode(self, x):
        mu, logvar = self.enc(x).chunk(2, dim=-1)
        return mu + torch.randn_like(mu) * torch.exp(0.5 * logvar), mu, logvar

vae = VAE()
opt_dec = torch.optim.Adam(vae.dec.parameters(), lr=1e-3)
opt_enc = torch.optim.Adam(vae.enc.parameters(), lr=1e-3)
x = torch.randn(16, 8)
for _ in range(3):
    z, mu, logvar = vae.encode(x)
    (vae.dec(z.detach()) - x).pow(2).mean().backward()
    opt_dec.step()
    vae.zero_grad()
    z, mu, logvar = vae.encode(x)
    (torch.exp(logvar) + mu ** 2 - 1 - logvar).mean().backward()
    opt_enc.step()
    vae.zero_grad()
""",
    "both_terms_live": """
netg = nn.Sequential(nn.Linear(8, 8), nn.Tanh())
netd = nn.Sequential(nn.Linear(8, 1), nn.Sigmoid()).requires_grad_(False)
opt_g = torch.optim.Adam(netg.parameters(), lr=2e-4)
for _ in range(2):
    x, gt = torch.randn(4, 8), torch.randn(4, 8)
    fake = netg(x)
    pred = netd(fake)
    err = F.binary_cross_entropy(pred, torch.ones(4, 1)) + 50 * F.l1_loss(fake, gt)
    opt_g.zero_grad()
    err.backward()
    opt_g.step()
""",
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_cause_line_named_first(run_script, name):
    code, body = BUGS[name]
    src = (HEAD + body).lstrip("\n")
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))
    res = run_script(src)
    assert res.findings, res.err
    first = res.findings[0]
    assert (first["code"], first["path"], first["line"]) == (code, "prog.py", line), res.err


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalike_silent(run_script, name):
    res = run_script((HEAD + LOOKALIKES[name]).lstrip("\n"))
    assert res.code == 0 and res.findings == [], res.err


def test_runtime_names_the_rebuilt_list_without_static_help(tmp_path):
    """The diagnosis of the rebuilt .item() list is the runtime's own (static checks off)."""
    import runpy

    import gradtrace

    code, body = BUGS["item_appended_then_rebuilt"]
    src = (HEAD + body).lstrip("\n")
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))
    path = tmp_path / "agent.py"
    path.write_text(src, encoding="utf-8")
    with pytest.raises(RuntimeError, match="does not require grad"):
        with gradtrace.trace(static=False) as tr:
            runpy.run_path(str(path))
    assert [(f.code, f.line, f.source) for f in tr.diagnosis] == [("GT102", line, "runtime")]


def test_shape_only_factory_is_no_cut():
    """torch.randn_like(h) reads only h's shape: a parameter whose output feeds nothing else is
    not said to be cut by it."""
    import torch

    import gradtrace

    enc, dec = torch.nn.Linear(3, 3), torch.nn.Linear(3, 1)
    opt = torch.optim.SGD([*enc.parameters(), *dec.parameters()], lr=0.1)
    with gradtrace.trace(static=False) as tr:
        for _ in range(2):
            h = enc(torch.randn(4, 3))
            noise = torch.randn_like(h)
            opt.zero_grad()
            dec(noise).pow(2).mean().backward()
            opt.step()
    assert tr.findings, "enc never gets a gradient"
    assert all("randn_like" not in f.message for f in tr.findings), tr.findings


# a GradScaler skips the first step (inf gradients): torch warns about the order, wrongly
AMP_SKIPPED_STEP = """
model = nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
scaler = torch.amp.GradScaler("cpu")
for it in range(3):
    opt.zero_grad()
    loss = model(torch.randn(4, 8)).pow(2).mean() * (float("inf") if it == 0 else 1.0)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    sched.step()
"""


def test_scheduler_order_not_reported_when_a_grad_scaler_skipped_the_step(run_script):
    """torch warns about the order when GradScaler skipped optimizer.step(): not a bug."""
    res = run_script((HEAD + AMP_SKIPPED_STEP).lstrip("\n"))
    assert res.code == 0 and "GT515" not in res.codes(), res.err


def test_parameter_of_a_module_never_seen_is_placed_at_its_optimizer():
    """A parameter whose module ran only on unarmed steps has no module call to point at: the
    finding sits where the optimizer holding it was built (not at <unknown>:1)."""
    import inspect

    import torch
    import torch.nn as nn

    import gradtrace
    from gradtrace.runtime.pace import WARM_STEPS

    torch.manual_seed(0)
    model, extra = nn.Linear(4, 1), nn.Linear(4, 4)
    opt = torch.optim.SGD([*model.parameters(), *extra.parameters()], lr=0.1)  # OPT
    x = torch.randn(8, 4)
    with gradtrace.trace(every=1000, static=False) as tr:
        for i in range(WARM_STEPS + 10):
            opt.zero_grad()
            h = x
            if i > WARM_STEPS + 2:
                with torch.no_grad():
                    h = extra(x)
            model(h).pow(2).mean().backward()
            opt.step()
    here = test_parameter_of_a_module_never_seen_is_placed_at_its_optimizer
    lines, start = inspect.getsourcelines(here)
    opt_line = start + next(i for i, t in enumerate(lines) if t.rstrip().endswith("# OPT"))
    found = [f for f in tr.findings if "never received a gradient" in f.message]
    assert [(f.line, f.path.endswith("test_cause_lines_kept.py")) for f in found] == \
        [(opt_line, True)]


def test_eval_under_no_grad_before_training_is_not_the_cut(tmp_path):
    """An evaluation pass under no_grad before the first step (nanoGPT's estimate_loss) is not
    why the parameters get no gradient: the `.item()` rebuilt into the training loss is, and
    all parameters cut there are one finding."""
    import runpy

    import gradtrace

    src = (HEAD + """
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)

@torch.no_grad()
def estimate_loss():
    return F.mse_loss(model(torch.randn(8, 4)), torch.zeros(8, 1)).item()

for it in range(3):
    if it == 0:
        print(estimate_loss())
    loss = F.mse_loss(model(torch.randn(8, 4)), torch.zeros(8, 1))
    loss = torch.tensor(loss.item(), requires_grad=True)  # C
    opt.zero_grad()
    loss.backward()
    opt.step()
""").lstrip("\n")
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))
    path = tmp_path / "train.py"
    path.write_text(src, encoding="utf-8")
    with gradtrace.trace(static=False) as tr:
        runpy.run_path(str(path))
    found = [(f.code, f.line) for f in tr.findings]
    assert found == [("GT102", line)], tr.findings
    assert "0.weight" in tr.findings[0].message and "2.weight" in tr.findings[0].message


EMPTY_GROUPS = """
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
kept = [p for p in model.parameters() if not p.requires_grad]
{extra}opt = torch.optim.AdamW([{{"params": kept}}, {{"params": []}}], lr=1e-3)  # C
for it in range(3):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad()
    {extra_zero}loss.backward()
    opt.step()
    {extra_step}
"""


@pytest.mark.parametrize("extra, found", [
    ("", True),  # the only optimizer holds nothing: nothing trains
    ("main = torch.optim.SGD(model.parameters(), lr=0.1)\n", False),  # another one trains all
])
def test_optimizer_with_empty_groups(tmp_path, extra, found):
    """torch raises for an empty parameter list but not for empty parameter groups: the
    optimizer that steps while holding nothing is named where it was built."""
    import runpy

    import gradtrace

    src = (HEAD + EMPTY_GROUPS.format(
        extra=extra, extra_zero="main.zero_grad()\n    " if extra else "",
        extra_step="main.step()" if extra else "")).lstrip("\n")
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))
    path = tmp_path / "train.py"
    path.write_text(src, encoding="utf-8")
    with gradtrace.trace(static=False) as tr:
        runpy.run_path(str(path))
    got = [(f.code, f.line) for f in tr.findings]
    assert got == ([("GT821", line)] if found else []), tr.findings


def test_optimizer_stepped_through_a_scaler_is_named_where_built(tmp_path):
    """`scaler.step(opt)`: the optimizer is the argument, not the scaler (nanoGPT's loop)."""
    import runpy

    import gradtrace

    src = (HEAD + """
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
kept = [p for p in model.parameters() if not p.requires_grad]
opt = torch.optim.AdamW([{"params": kept}], lr=1e-3)  # C
scaler = torch.amp.GradScaler("cpu", enabled=False)
for it in range(3):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
""").lstrip("\n")
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))
    path = tmp_path / "train.py"
    path.write_text(src, encoding="utf-8")
    with gradtrace.trace(static=False) as tr:
        runpy.run_path(str(path))
    assert [(f.code, f.line) for f in tr.findings] == [("GT821", line)], tr.findings
