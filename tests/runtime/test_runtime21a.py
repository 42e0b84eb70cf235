"""Session-21 run-time readings on silent misses of loop_order, optimizer_wiring and freezing
(docs/triage/runtime21a.md):

- GT526 (NOTE [schedule past its horizon]): a ``CosineAnnealingLR`` sized in epochs stepped once
  per optimizer step passes its ``T_max`` and the rate climbs back up;
- GT526 (NOTE [schedule collapsed], threshold now 1/10): an epoch-counted scheduler stepped once
  per optimizer step lost 90% of its rate within 64 steps;
- GT513 (NOTE [accumulated means not scaled]): k backward() calls of one line per step, each a
  mean-reduced loss not divided by k;
- GT890 (NOTE [EMA between steps]): a moving average of the weights updated more often than the
  optimizer steps (once per micro-batch);
- GT841 (NOTE [probe statistics], widened): a frozen stage's BatchNorm, whose statistics were
  loaded (not at their initial values), switched back to train mode by an explicit ``.train()``
  of the model while the layers after it train.

Buggy twins in spellings other than the real-world cases (auto-PyTorch, llama-recipes, nanoGPT,
fastai, ultralytics) and look-alikes that stay silent. Real torch, in-process.
"""
from __future__ import annotations

import pytest
from rt_helpers import marked_line

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
batches = [(torch.randn(8, 6), torch.randint(0, 3, (8,))) for _ in range(6)]
"""

SCHEDULE_BUGS = {
    # a trainer class: the cosine sized in epochs, stepped in the per-batch method
    "trainer_class_cosine_per_batch": """
class Trainer:
    def __init__(self, model, epochs):
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
        self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=epochs)

    def batch_step(self, x, y):
        loss = F.cross_entropy(self.model(x), y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.sched.step()  # <- cause
        return loss.item()

    def fit(self, epochs):
        for _ in range(epochs):
            for x, y in batches:
                self.batch_step(x, y)

Trainer(nn.Linear(6, 3), 4).fit(4)
""",
    # a helper function with a while loop; eta_min given
    "function_while_loop_cosine": """
def fit(model, epochs):
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs, eta_min=1e-4)
    for epoch in range(epochs):
        it = iter(batches)
        while True:
            try:
                x, y = next(it)
            except StopIteration:
                break
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
            sched.step()  # <- cause

fit(nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)), 3)
""",
    # an exponential decay meant per epoch, stepped per batch: 10% of the rate within 22 steps
    "exponential_per_batch_in_method": """
class Loop:
    def __init__(self, net):
        self.net = net
        self.optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
        self.decay = torch.optim.lr_scheduler.ExponentialLR(self.optimizer, gamma=0.9)

    def run(self, epochs):
        for _ in range(epochs):
            for x, y in batches:
                self.optimizer.zero_grad()
                F.cross_entropy(self.net(x), y).backward()
                self.optimizer.step()
                self.decay.step()  # <- cause

Loop(nn.Linear(6, 3)).run(5)
""",
}

SCHEDULE_LOOKALIKES = {
    # the fix: once per epoch
    "cosine_per_epoch": """
model = nn.Linear(6, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
for _ in range(4):
    for x, y in batches:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    sched.step()
""",
    # per batch, sized in batches
    "cosine_sized_in_batches": """
model = nn.Linear(6, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4 * len(batches))
for _ in range(4):
    for x, y in batches:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
        sched.step()
""",
    # restarts on purpose
    "warm_restarts_per_batch": """
model = nn.Linear(6, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=4)
for _ in range(4):
    for x, y in batches:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
        sched.step()
""",
    # a slow per-iteration decay, and a per-epoch StepLR of step 1
    "slow_exponential_and_per_epoch_steplr": """
model = nn.Linear(6, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.99)
other = nn.Linear(6, 3)
opt2 = torch.optim.SGD(other.parameters(), lr=0.1)
sched2 = torch.optim.lr_scheduler.StepLR(opt2, step_size=1, gamma=0.5)
for _ in range(6):
    for x, y in batches:
        opt.zero_grad()
        opt2.zero_grad()
        (F.cross_entropy(model(x), y) + F.cross_entropy(other(x), y)).backward()
        opt.step()
        opt2.step()
        sched.step()
    sched2.step()
""",
}

ACCUM_BUGS = {
    # a trainer method: the count of micro-batches on the object, the step behind a counter
    "trainer_counter": """
class Trainer:
    def __init__(self, model, accum):
        self.model, self.accum, self.seen = model, accum, 0
        self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
        self.crit = nn.CrossEntropyLoss()

    def micro_step(self, x, y):
        loss = self.crit(self.model(x), y)
        loss.backward()  # <- cause
        self.seen += 1
        if self.seen == self.accum:
            self.opt.step()
            self.opt.zero_grad()
            self.seen = 0

t = Trainer(nn.Linear(6, 3), 3)
for _ in range(2):
    for x, y in batches:
        t.micro_step(x, y)
""",
    # a `.mean()` loss, a while loop over chunks of one batch
    "mean_loss_chunks": """
model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
big_x, big_y = torch.randn(32, 6), torch.randn(32, 1)
for epoch in range(3):
    i = 0
    while i < 32:
        err = (model(big_x[i:i + 8]) - big_y[i:i + 8]).pow(2).mean()
        err.backward()  # <- cause
        i += 8
    opt.step()
    opt.zero_grad()
""",
}

ACCUM_LOOKALIKES = {
    # the fix
    "divided_by_k": """
model = nn.Linear(6, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
k = 3
for i, (x, y) in enumerate(batches):
    (F.cross_entropy(model(x), y) / k).backward()
    if (i + 1) % k == 0:
        opt.step()
        opt.zero_grad()
""",
    # two losses backpropagated separately into one step (a discriminator's real and fake terms)
    "two_backward_lines": """
disc = nn.Linear(6, 1)
opt = torch.optim.SGD(disc.parameters(), lr=0.1)
for x, _ in batches:
    opt.zero_grad()
    F.binary_cross_entropy_with_logits(disc(x), torch.ones(8, 1)).backward()
    F.binary_cross_entropy_with_logits(disc(torch.randn(8, 6)), torch.zeros(8, 1)).backward()
    opt.step()
""",
    # a sum-reduced loss summed on purpose
    "sum_reduction": """
model = nn.Linear(6, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i, (x, y) in enumerate(batches):
    F.cross_entropy(model(x), y, reduction="sum").backward()
    if i % 2 == 1:
        opt.step()
        opt.zero_grad()
""",
    # the terms of one forward pass backpropagated one by one (retain_graph) into one step
    "terms_of_one_forward": """
heads = nn.ModuleList([nn.Linear(6, 3) for _ in range(3)])
opt = torch.optim.SGD(heads.parameters(), lr=0.1)
for x, y in batches:
    opt.zero_grad()
    outs = [h(x) for h in heads]
    for j, out in enumerate(outs):
        F.cross_entropy(out, y).backward(retain_graph=j < len(outs) - 1)
    opt.step()
""",
    # a step after every backward
    "step_every_batch": """
model = nn.Linear(6, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in batches:
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
""",
}

BN_HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
data = [(torch.rand(4, 3, 8, 8) * 2 + 1, torch.randint(0, 2, (4,))) for _ in range(3)]


def stage(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU())


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = stage(3, 6)
        self.body = stage(6, 6)
        self.head = nn.Linear(6, 2)

    def forward(self, x):
        return self.head(self.body(self.stem(x)).mean((2, 3)))


def pretrained():  # a Net loaded from a checkpoint whose stem statistics were learnt elsewhere
    state = Net().state_dict()
    state["stem.1.running_mean"] = torch.full((6,), 0.8)
    state["stem.1.running_var"] = torch.full((6,), 2.0)
    net = Net()
    net.load_state_dict(state)
    return net
"""

BN_BUGS = {
    # a trainer class freezing the stem by name, switching the model on every epoch
    "trainer_freezes_stem_by_name": """
class Runner:
    def __init__(self, net):
        self.net = net
        for name, p in net.named_parameters():
            if name.startswith("stem."):
                p.requires_grad = False
        self.opt = torch.optim.SGD([p for p in net.parameters() if p.requires_grad], lr=0.1)

    def epoch(self):
        self.net.train()  # <- cause
        for x, y in data:
            self.opt.zero_grad()
            F.cross_entropy(self.net(x), y).backward()
            self.opt.step()

r = Runner(pretrained())
for _ in range(2):
    r.epoch()
""",
    # a function: the stage frozen with requires_grad_(False) on the module
    "function_requires_grad_module": """
def finetune(model, epochs):
    model.stem.requires_grad_(False)
    opt = torch.optim.Adam(model.body.parameters(), lr=1e-3)
    opt.add_param_group({"params": model.head.parameters()})
    for _ in range(epochs):
        model.train(True)  # <- cause
        for x, y in data:
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()

net = Net()
with torch.no_grad():  # statistics of a pretrained stem
    net.stem[1].running_mean.normal_(0.0, 0.5)
    net.stem[1].running_var.uniform_(0.5, 2.0)
finetune(net, 2)
""",
}

BN_LOOKALIKES = {
    # fresh statistics (nothing loaded) under trained convolutions: left to adapt
    "fresh_stem_statistics": """
model = Net()
model.stem.requires_grad_(False)
opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
for _ in range(2):
    model.train()
    for x, y in data:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
""",
    # the fix: the frozen stage put back in eval after every model.train()
    "stem_back_in_eval": """
model = pretrained()
model.stem.requires_grad_(False)
opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
for _ in range(2):
    model.train()
    model.stem.eval()
    for x, y in data:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
""",
    # a frozen copy run under no_grad in train mode (a target network), the student trains
    "frozen_target_under_no_grad": """
student, target = Net(), Net()
for p in target.parameters():
    p.requires_grad = False
opt = torch.optim.SGD(student.parameters(), lr=0.1)
pair = nn.ModuleList([student, target])
for _ in range(2):
    pair.train()
    for x, y in data:
        with torch.no_grad():
            t = target(x).softmax(-1)
        loss = F.cross_entropy(student(x), t)
        opt.zero_grad()
        loss.backward()
        opt.step()
""",
    # the BatchNorm layers frozen both ways (eval and requires_grad) after train()
    "bn_frozen_both_ways": """
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    model.train()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.eval()
            m.weight.requires_grad_(False)
            m.bias.requires_grad_(False)
    for x, y in data:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
""",
}


EMA_HEAD = HEAD + """
import copy


def ema_update(avg, model, decay):
    with torch.no_grad():
        for a, p in zip(avg.parameters(), model.parameters()):
            a.lerp_(p, 1 - decay)
"""

EMA_BUGS = {
    # a helper averaging with lerp_, called every iteration; the optimizer steps every second
    "helper_lerp_every_iteration": """
gen = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
avg = copy.deepcopy(gen)
opt = torch.optim.Adam(gen.parameters(), lr=1e-3)
for it, (x, y) in enumerate(batches * 2):
    (F.cross_entropy(gen(x), y) / 2).backward()
    if it % 2 == 1:
        opt.step()
        opt.zero_grad()
    ema_update(avg, gen, 0.99)  # <- cause
""",
    # a trainer class with a hook method run after every micro-batch, add_ with alpha
    "trainer_hook_after_every_batch": """
class Shadow:
    def __init__(self, model, decay=0.9):
        self.model = copy.deepcopy(model)
        self.decay = decay

    @torch.no_grad()
    def step(self, model):
        for s, p in zip(self.model.parameters(), model.parameters()):
            s.mul_(self.decay).add_(p, alpha=1 - self.decay)


class Trainer:
    def __init__(self, model, accum=3):
        self.model, self.accum = model, accum
        self.shadow = Shadow(model)
        self.opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def on_batch_end(self):
        self.shadow.step(self.model)

    def fit(self):
        for i, (x, y) in enumerate(batches * 2):
            (F.cross_entropy(self.model(x), y) / self.accum).backward()
            if (i + 1) % self.accum == 0:
                self.opt.step()
                self.opt.zero_grad()
            self.on_batch_end()  # <- cause

Trainer(nn.Linear(6, 3)).fit()
""",
}

EMA_LOOKALIKES = {
    # the fix: after each step
    "average_after_each_step": """
gen = nn.Linear(6, 3)
avg = copy.deepcopy(gen)
opt = torch.optim.Adam(gen.parameters(), lr=1e-3)
for it, (x, y) in enumerate(batches * 2):
    (F.cross_entropy(gen(x), y) / 2).backward()
    if it % 2 == 1:
        opt.step()
        opt.zero_grad()
        ema_update(avg, gen, 0.99)
""",
    # a hard copy every micro-batch (idempotent), and an average with a step every batch
    "hard_copy_and_average_every_step": """
net = nn.Linear(6, 3)
target, avg = copy.deepcopy(net), copy.deepcopy(net)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for it, (x, y) in enumerate(batches * 2):
    (F.cross_entropy(net(x), y) / 2).backward()
    if it % 2 == 1:
        opt.step()
        opt.zero_grad()
    with torch.no_grad():
        for t, p in zip(target.parameters(), net.parameters()):
            t.copy_(p)
net2 = nn.Linear(6, 3)
opt2 = torch.optim.SGD(net2.parameters(), lr=0.1)
for x, y in batches:
    opt2.zero_grad()
    F.cross_entropy(net2(x), y).backward()
    opt2.step()
    ema_update(avg, net2, 0.9)
""",
}


def _first(res):
    assert res.code == 0, res.err
    assert res.findings, res.err
    f = res.findings[0]
    return f["code"], f["line"], f["path"]


@pytest.mark.parametrize("name", sorted(SCHEDULE_BUGS))
def test_schedule_per_batch_named(name, run_script):
    src = HEAD + SCHEDULE_BUGS[name]
    assert _first(run_script(src)) == ("GT526", marked_line(src), "prog.py")


@pytest.mark.parametrize("name", sorted(SCHEDULE_LOOKALIKES))
def test_schedule_lookalikes_silent(name, run_script):
    res = run_script(HEAD + SCHEDULE_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert "GT526" not in res.codes(), res.findings


@pytest.mark.parametrize("name", sorted(ACCUM_BUGS))
def test_unscaled_accumulation_named(name, run_script):
    src = HEAD + ACCUM_BUGS[name]
    assert _first(run_script(src)) == ("GT513", marked_line(src), "prog.py")


@pytest.mark.parametrize("name", sorted(ACCUM_LOOKALIKES))
def test_unscaled_accumulation_lookalikes_silent(name, run_script):
    res = run_script(HEAD + ACCUM_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert "GT513" not in res.codes(), res.findings


@pytest.mark.parametrize("name", sorted(BN_BUGS))
def test_frozen_stage_statistics_named(name, run_script):
    src = BN_HEAD + BN_BUGS[name]
    assert _first(run_script(src)) == ("GT841", marked_line(src), "prog.py")


@pytest.mark.parametrize("name", sorted(BN_LOOKALIKES))
def test_frozen_stage_statistics_lookalikes_silent(name, run_script):
    res = run_script(BN_HEAD + BN_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert "GT841" not in res.codes(), res.findings


@pytest.mark.parametrize("name", sorted(EMA_BUGS))
def test_average_between_steps_named(name, run_script):
    src = EMA_HEAD + EMA_BUGS[name]
    assert _first(run_script(src)) == ("GT890", marked_line(src), "prog.py")


@pytest.mark.parametrize("name", sorted(EMA_LOOKALIKES))
def test_average_between_steps_lookalikes_silent(name, run_script):
    res = run_script(EMA_HEAD + EMA_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert "GT890" not in res.codes(), res.findings
