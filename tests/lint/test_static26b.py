"""Readings of docs/triage/static26b.md, each in spellings the real-world cases do not use, as a
buggy twin that real torch fails on (or whose step applies what the bug says) and a correct
look-alike; the checker reports the first and stays silent on the second."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import lr_scheduler
torch.manual_seed(0)
'''

# a counted accumulation in a method: the step every `budget` samples (NOTE [counted step]);
# `stepped` records the gradient each step applies, `full` the gradient of all its samples
COUNTED = '''
class Fitter:
    def __init__(self, budget):
        self.net = nn.Linear(3, 1)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
        self.budget, self.stepped = budget, []
    def fit(self, batches):
        self.seen = 0
        for xb, yb in batches:
            CLEAR_EVERY
            F.mse_loss(self.net(xb), yb, reduction="sum").backward()
            self.seen += len(xb)
            if self.seen >= self.budget:
                self.stepped.append(self.net.weight.grad.clone())
                self.opt.step()
                CLEAR_AFTER
                self.seen = 0
xs, ys = torch.randn(8, 3), torch.randn(8, 1)
fitter = Fitter(budget=8)
w0, b0 = fitter.net.weight.detach().clone(), fitter.net.bias.detach().clone()
fitter.fit([(xs[i:i + 2], ys[i:i + 2]) for i in range(0, 8, 2)])
ref = w0.clone().requires_grad_()
F.mse_loss(xs @ ref.t() + b0, ys, reduction="sum").backward()
same = torch.allclose(fitter.stepped[0], ref.grad, atol=1e-5)
'''

# the count measured from a step index bound anew each pass, reset to it under the guard
SINCE = '''
def run(model, opt, loader, every):
    last, applied = -1, []
    for epoch in range(2):
        for i, (x, y) in enumerate(loader):
            it = i + epoch * len(loader)
            CLEAR_EVERY
            model(x).sum().backward()
            if it - last >= every:
                applied.append(model.weight.grad.clone())
                opt.step()
                CLEAR_AFTER
                last = it
    return applied
model = nn.Linear(2, 1, bias=False)
opt = torch.optim.SGD(model.parameters(), lr=0.0)
loader = [(torch.ones(1, 2) * (k + 1), torch.zeros(1, 1)) for k in range(4)]
applied = run(model, opt, loader, 2)
'''

# a scheduler factory of the file; the plateau is one of its policies
FACTORY = '''
def make_schedule(optimizer, policy):
    if policy == "cosine":
        sched = lr_scheduler.CosineAnnealingLR(optimizer, T_max=10)
    elif policy == "plateau":
        sched = lr_scheduler.ReduceLROnPlateau(optimizer, patience=1)
    return sched
class Runner:
    def __init__(self, policy):
        self.policy = policy
        self.nets = [nn.Linear(2, 2), nn.Linear(2, 2)]
        self.opts = [torch.optim.SGD(n.parameters(), lr=0.1) for n in self.nets]
        SCHEDULERS
    def end_epoch(self, val):
        STEP
'''

# a loop of micro-steps in a method, the step after it (NOTE [micro-step loop]); `grads`
# records what each step applies, `mean` the mean gradient of the same micro-batches
MICRO = '''
class Trainer:
    def __init__(self, model, n_micro):
        self.model, self.n_micro = model, n_micro
        self.opt = torch.optim.SGD(model.parameters(), lr=0.0)
        self.grads = []
    def draw(self):
        return torch.ones(2, 3) * (len(self.grads) + 1), torch.zeros(2, 1)
    def update(self):
        for _ in range(self.n_micro):
            x, y = self.draw()
            loss = F.mse_loss(self.model(x), y)
            LOSS.backward()
        self.grads.append(self.model.weight.grad.clone())
        self.opt.step()
        self.opt.zero_grad()
model = nn.Linear(3, 1)
t = Trainer(model, 4)
t.update()
x0, y0 = t.draw()
mean = torch.autograd.grad(F.mse_loss(model(torch.ones(2, 3)), y0), model.weight)[0]
ratio = (t.grads[0] / mean).mean().item()
'''

# heads trained one per task in an inner loop: the sum over tasks is the objective
# a critic trained for n steps per generator step, the generator's loss then stepped
CRITIC = '''
critic, gen = nn.Linear(2, 1), nn.Linear(2, 2)
opt_c = torch.optim.SGD(critic.parameters(), lr=0.1)
opt_g = torch.optim.SGD(gen.parameters(), lr=0.1)
n_critic = 3
for it in range(2):
    z = torch.randn(4, 2)
    for _ in range(n_critic):
        opt_c.zero_grad()
        c_loss = critic(gen(z).detach()).mean() - critic(torch.randn(4, 2)).mean()
        c_loss.backward()
        opt_c.step()
    opt_g.zero_grad()
    g_loss = -critic(gen(z)).mean()
    g_loss.backward()
    opt_g.step()
'''

TASKS = '''
heads = nn.ModuleList([nn.Linear(3, 1) for _ in range(3)])
opt = torch.optim.SGD(heads.parameters(), lr=0.1)
n_tasks = len(heads)
for epoch in range(2):
    x = torch.randn(4, 3)
    for k in range(n_tasks):
        loss = heads[k](x).pow(2).mean()
        loss.backward()
    opt.step()
    opt.zero_grad()
'''

# rows of an embedding kept by a masking gradient hook (NOTE [zeroing hook])
MASKED = '''
class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(6, 3)
        self.out = nn.Linear(3, 2)
    def forward(self, ids):
        return self.out(self.emb(ids).mean(1))
tagger = Tagger()
keep = torch.zeros(6, 1, dtype=torch.bool)
keep[:4] = True
tagger.emb.weight.register_hook(lambda g: g.masked_fill(keep, 0))
OPT
old = tagger.emb.weight[:4].detach().clone()
for _ in range(3):
    F.cross_entropy(tagger(torch.randint(0, 6, (5, 2))), torch.randint(0, 2, (5,))).backward()
    opt.step()
    opt.zero_grad()
moved = (tagger.emb.weight[:4] - old).abs().max().item()
'''

# a whole encoder frozen by a function hook put on each of its parameters
FROZEN_BY_HOOK = '''
def no_grad_hook(grad):
    return torch.zeros_like(grad)
def freeze(module):
    for p in module.parameters():
        p.register_hook(no_grad_hook)
encoder, head = nn.Linear(3, 3), nn.Linear(3, 1)
freeze(encoder)
def fit(encoder, head):
    OPT
    w = encoder.weight.detach().clone()
    for _ in range(3):
        head(encoder(torch.randn(4, 3))).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
    return (encoder.weight - w).abs().max().item()
moved = fit(encoder, head)
'''

# a file's weight average folded in by `fold`, in a training function with accumulation
SHADOW = '''
class Shadow:
    def __init__(self, net, decay=0.9):
        self.params = [p.detach().clone() for p in net.parameters()]
        self.decay, self.updates = decay, 0
    @torch.no_grad()
    def fold(self, net):
        self.updates += 1
        for s, p in zip(self.params, net.parameters()):
            s.mul_(self.decay).add_(p.detach(), alpha=1 - self.decay)
def train(net, batches, every):
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    shadow = Shadow(net)
    for k, (x, y) in enumerate(batches):
        (F.mse_loss(net(x), y) / every).backward()
        if k % every == every - 1:
            opt.step()
            opt.zero_grad()
            GUARDED
        EVERY
    return shadow
net = nn.Linear(2, 1)
shadow = train(net, [(torch.randn(3, 2), torch.randn(3, 1)) for _ in range(8)], 4)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT512 with a sample counter that the step's `if` compares and resets (openWakeWord's
    # shape in a method, a `self.` counter). Look-alike: the clear follows the step
    "counted-accumulation-cleared-every-pass": (Shape(
        COUNTED.replace("CLEAR_EVERY", "pass").replace(
            "CLEAR_AFTER", "self.opt.zero_grad()"), "GT512", holds="same"), Shape(
        COUNTED.replace("CLEAR_EVERY", "self.opt.zero_grad()").replace(
            "CLEAR_AFTER", "pass"), "GT512", 9, holds="not same")),
    # GT512 with a count measured since the last step (`it - last >= every`, `last = it`).
    # Look-alike: the clear follows the step; the twin's steps apply one pass's gradient
    "since-last-step-accumulation-cleared-every-pass": (Shape(
        SINCE.replace("CLEAR_EVERY", "pass").replace("CLEAR_AFTER", "opt.zero_grad()"),
        "GT512", holds="applied[1][0, 0].item() == 3 + 4"), Shape(
        SINCE.replace("CLEAR_EVERY", "opt.zero_grad()").replace("CLEAR_AFTER", "pass"),
        "GT512", 6, holds="applied[1][0, 0].item() == 4")),
    # GT531 through a factory whose result is collected for each optimizer and stepped in a
    # loop without the metric (CycleGAN's shape, other names). Look-alike: the loop passes
    # the metric to the plateau policy
    "factory-plateau-collected-stepped-bare": (Shape(FACTORY.replace(
        "SCHEDULERS", "self.scheds = [make_schedule(o, policy) for o in self.opts]").replace(
        "STEP", """for s in self.scheds:
            if isinstance(s, lr_scheduler.ReduceLROnPlateau):
                s.step(val)
            else:
                s.step()""") + "r = Runner('plateau')\nr.end_epoch(1.0)\n", "GT531"), Shape(
        FACTORY.replace(
            "SCHEDULERS", "self.scheds = [make_schedule(o, policy) for o in self.opts]"
        ).replace("STEP", """for s in self.scheds:
            s.step()""") + "r = Runner('plateau')\nr.end_epoch(1.0)\n", "GT531", 15,
        raises=(TypeError, "metrics"))),
    # GT531 variant: the factory's result bound to one attribute (`self.sched = make(...)`).
    # Look-alike: an isinstance test sends the metric to the plateau
    # GT531 look-alike: the caller's own setting, handed to the factory, picks the metric
    "factory-plateau-setting-picks-metric": (Shape(FACTORY.replace(
        "SCHEDULERS", "self.scheds = [make_schedule(o, policy) for o in self.opts]").replace(
        "STEP", """for s in self.scheds:
            if self.policy == "plateau":
                s.step(val)
            else:
                s.step()""") + "r = Runner('plateau')\nr.end_epoch(1.0)\n", "GT531"), Shape(
        FACTORY.replace("SCHEDULERS", "self.sched = make_schedule(self.opts[0], policy)").replace(
            "STEP", "self.sched.step()") + "Runner('plateau').end_epoch(1.0)\n",
        "GT531", 14, raises=(TypeError, "metrics"))),
    # GT513 for a loop of micro-steps in a method (`for _ in range(self.n_micro)`), the step
    # after it: the twin steps on 4x the mean gradient. Look-alike: the loss is divided
    "micro-step-loop-loss-not-divided": (Shape(
        MICRO.replace("LOSS.backward()", "(loss / self.n_micro).backward()"), "GT513",
        holds="abs(ratio - 1.0) < 1e-4"), Shape(
        MICRO.replace("LOSS.backward()", "loss.backward()"), "GT513", 12,
        holds="abs(ratio - 4.0) < 1e-4")),
    # GT513 look-alike: the inner loop trains a distinct head per pass (its variable is read)
    "inner-loop-over-tasks-sums-losses": (Shape(TASKS, "GT513"), Shape(
        TASKS.replace("heads[k](x)", "heads[0](x)"), "GT513", 8)),
    # GT552 for a masking gradient hook (a lambda on one weight) under AdamW's default decay.
    # Look-alike: weight_decay=0.0 keeps the masked rows
    "masking-hook-rows-decayed": (Shape(MASKED.replace(
        "OPT", "opt = torch.optim.AdamW(tagger.parameters(), lr=0.1, weight_decay=0.0)"),
        "GT552", holds="moved == 0"), Shape(MASKED.replace(
            "OPT", "opt = torch.optim.AdamW(tagger.parameters(), lr=0.1)"), "GT552", 12,
            holds="moved > 0")),
    # GT552 variant: a function hook put on every parameter in a helper, the optimizer built
    # in another function with L2 decay. Look-alike: the encoder is left out of the optimizer
    "function-hook-frozen-encoder-decayed": (Shape(FROZEN_BY_HOOK.replace(
        "OPT", "opt = torch.optim.Adam(head.parameters(), lr=0.1, weight_decay=0.1)"),
        "GT552", holds="moved == 0"), Shape(FROZEN_BY_HOOK.replace(
            "OPT", "opt = torch.optim.Adam(encoder.parameters(), lr=0.1, weight_decay=0.1)"),
            "GT552", 9, holds="moved > 0")),
    # GT513 look-alike: the inner loop runs whole critic updates (monai's GAN trainer shape);
    # twin: the critic's clear and step moved out of the inner loop, after it
    "inner-loop-of-critic-updates": (Shape(CRITIC, "GT513"), Shape(CRITIC.replace(
        "        opt_c.zero_grad()\n", "").replace("        opt_c.step()\n", "").replace(
        "    opt_g.zero_grad()\n",
        "    opt_c.step()\n    opt_c.zero_grad()\n    opt_g.zero_grad()\n"), "GT513", 9)),
    # GT572 for a file's average built in the training function, folded on every pass (a
    # remainder guard written `k % every == every - 1`): 8 folds for 2 optimizer steps.
    # Look-alike: folded under the step's `if`
    "average-folded-every-micro-batch": (Shape(SHADOW.replace(
        "GUARDED", "shadow.fold(net)").replace("EVERY", "pass"), "GT572",
        holds="shadow.updates == 2"), Shape(SHADOW.replace("GUARDED", "pass").replace(
            "EVERY", "shadow.fold(net)"), "GT572", 19, holds="shadow.updates == 8")),
    "factory-plateau-bound-stepped-bare": (Shape(FACTORY.replace(
        "SCHEDULERS", "self.sched = make_schedule(self.opts[0], policy)").replace(
        "STEP", """if isinstance(self.sched, lr_scheduler.ReduceLROnPlateau):
            self.sched.step(val)
        else:
            self.sched.step()""") + "r = Runner('plateau')\nr.end_epoch(1.0)\n", "GT531"),
        Shape(FACTORY.replace(
            "SCHEDULERS", "self.sched = make_schedule(self.opts[0], policy)").replace(
            "STEP", "self.sched.step()") + "r = Runner('plateau')\nr.end_epoch(1.0)\n",
            "GT531", 14, raises=(TypeError, "metrics"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
