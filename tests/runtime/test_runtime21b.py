"""Session-21 crash causes read at run time (docs/triage/runtime21b.md):

- GT807 (NOTE [numpy of a kept training value]): a tensor converted to numpy whose graph
  backward() already ran through is a training value kept past its step; the line named is the
  statement that keeps it (in the function of that backward), not the plot that converts it;
- GT833 (NOTE [hook before any gradient]): a gradient hook registered under no_grad before any
  backward() ran in the program: the no_grad block is what is wrong (the hook's code never ran
  with gradients), not the registration.

Buggy twins in spellings other than the real-world cases, and look-alikes. Real torch,
in-process.
"""
from __future__ import annotations

import pytest
from rt_helpers import marked_line

NP_HEAD = """
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
x, y = torch.randn(16, 4), torch.randn(16, 1)
"""

KEPT_NUMPY_BUGS = {
    # a trainer class keeps every loss in a dict of histories; a report converts them
    "trainer_dict_history": """
class Trainer:
    def __init__(self):
        self.net = nn.Linear(4, 1)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
        self.log = {"loss": []}

    def fit(self, steps):
        for _ in range(steps):
            self.opt.zero_grad()
            err = F.mse_loss(self.net(x), y)
            err.backward()
            self.opt.step()
            self.log["loss"].append(err)  # <- cause

    def report(self):
        return np.asarray(self.log["loss"][-1]).mean()

t = Trainer()
t.fit(3)
print(t.report())
""",
    # a helper returns the total and one term; the loop keeps the term, averages, then numpy
    "helper_returns_term_kept": """
net = nn.Linear(4, 2)
opt = torch.optim.Adam(net.parameters(), lr=1e-2)

def losses(inp, tgt):
    out = net(inp)
    fit = F.mse_loss(out[:, :1], tgt)
    reg = out[:, 1:].pow(2).mean()
    return fit + 0.1 * reg, fit

terms = []
for step in range(4):
    total, part = losses(x, y)
    terms.append(part)  # <- cause
    opt.zero_grad()
    total.backward()
    opt.step()
mean_fit = sum(terms) / len(terms)
print(np.log(mean_fit))
""",
}

KEPT_NUMPY_LOOKALIKES = {
    # numbers are kept: nothing to report
    "items_kept": """
net = nn.Linear(4, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
hist = []
for _ in range(4):
    opt.zero_grad()
    loss = F.mse_loss(net(x), y)
    loss.backward()
    opt.step()
    hist.append(loss.item())
print(np.asarray(hist).mean())
""",
    # detached losses are kept: nothing to report
    "detached_kept": """
net = nn.Linear(4, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
hist = []
for _ in range(4):
    opt.zero_grad()
    loss = F.mse_loss(net(x), y)
    loss.backward()
    opt.step()
    hist.append(loss.detach())
print(np.log(torch.stack(hist)).mean())
""",
}

# evaluation outputs (never backpropagated) converted to numpy: the crash is still reported,
# but not at a list of losses (the fact "backward ran through it" is absent)
EVAL_NUMPY = """
net = nn.Linear(4, 1)
outs = []
for _ in range(2):
    pred = net(x)
    outs.append(pred)
print(np.concatenate([o.numpy() for o in outs]))  # <- cause
"""


@pytest.mark.parametrize("name", sorted(KEPT_NUMPY_BUGS))
def test_numpy_of_kept_training_value_names_the_store(name, run_script):
    src = NP_HEAD + KEPT_NUMPY_BUGS[name]
    res = run_script(src)
    assert res.code != 0
    assert res.findings, res.err
    first = res.findings[0]
    assert (first["code"], first["line"], first["path"]) == ("GT807", marked_line(src),
                                                             "prog.py"), res.findings


@pytest.mark.parametrize("name", sorted(KEPT_NUMPY_LOOKALIKES))
def test_numpy_of_kept_training_value_lookalikes_silent(name, run_script):
    res = run_script(NP_HEAD + KEPT_NUMPY_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert res.findings == [], res.findings


def test_numpy_of_evaluation_output_stays_at_the_conversion(run_script):
    src = NP_HEAD + EVAL_NUMPY
    res = run_script(src)
    assert res.code != 0
    first = res.findings[0]
    assert (first["code"], first["line"]) == ("GT807", marked_line(src)), res.findings


HOOK_HEAD = """
import torch
import torch.nn as nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
x = torch.randn(2, 6)
"""

HOOK_FIRST_BUGS = {
    # a saliency helper class: hook in a forward hook, the whole pass under no_grad
    "saliency_class_forward_hook": """
class Saliency:
    def __init__(self, layer):
        self.grad = None
        layer.register_forward_hook(self.keep)

    def keep(self, module, inp, out):
        out.register_hook(self.store)

    def store(self, g):
        self.grad = g

    def explain(self, scores):
        scores.max().backward()
        return self.grad.abs().sum(1)

sal = Saliency(net[1])
with torch.no_grad():  # <- cause
    scores = net(x)
    print(sal.explain(scores))
""",
    # a function: retain_grad on an activation, the analysis decorated with no_grad
    "script_retain_grad_in_function": """
def attribution(inp):
    h = net[0](inp)
    h.retain_grad()
    net[2](net[1](h)).sum().backward()
    return h.grad

with torch.no_grad():  # <- cause
    print(attribution(x))
""",
}

HOOK_LOOKALIKES = {
    # hooks registered in training and again (guarded) in evaluation: nothing to report
    "guarded_in_eval": """
def fwd(inp):
    h = net[0](inp)
    if h.requires_grad:
        h.register_hook(lambda g: None)
    return net[2](net[1](h))

opt = torch.optim.SGD(net.parameters(), lr=0.1)
fwd(x).sum().backward()
opt.step()
with torch.no_grad():
    print(fwd(x).shape)
""",
    # the analysis runs with grad on: nothing to report
    "analysis_with_grad": """
grads = []
h = net[0](x)
h.register_hook(grads.append)
net[2](net[1](h)).sum().backward()
print(grads[0].shape)
""",
}

# the hook's code ran with gradients before (training), then evaluation under no_grad reaches
# it: the registration is the line to guard (it stays named)
HOOK_SHARED = """
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 3)
        self.g = None

    def forward(self, inp):
        h = self.fc(inp)
        h.register_hook(self.put)  # <- cause
        return h

    def put(self, g):
        self.g = g

blk = Block()
blk(x).sum().backward()
with torch.no_grad():
    blk(x)
"""


@pytest.mark.parametrize("name", sorted(HOOK_FIRST_BUGS))
def test_hook_before_any_gradient_names_the_no_grad_block(name, run_script):
    src = HOOK_HEAD + HOOK_FIRST_BUGS[name]
    res = run_script(src)
    assert res.code != 0
    assert res.findings, res.err
    first = res.findings[0]
    assert (first["code"], first["line"]) == ("GT833", marked_line(src)), res.findings


@pytest.mark.parametrize("name", sorted(HOOK_LOOKALIKES))
def test_hook_lookalikes_silent(name, run_script):
    res = run_script(HOOK_HEAD + HOOK_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert res.findings == [], res.findings


def test_hook_in_shared_code_stays_at_the_registration(run_script):
    src = HOOK_HEAD + HOOK_SHARED
    res = run_script(src)
    assert res.code != 0
    first = res.findings[0]
    assert (first["code"], first["line"]) == ("GT833", marked_line(src)), res.findings


OFF_HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
net = nn.Linear(8, 4)
batches = [(torch.randn(6, 8), torch.randint(0, 2, (6,))) for _ in range(2)]
"""

OFF_CALLER_BUGS = {
    # a harness evaluates under no_grad; its per-batch method trains a probe
    "harness_method_trains_probe": """
class Probe:
    def fit(self, feats, labels):
        head = nn.Linear(feats.shape[1], 2)
        opt = torch.optim.SGD(head.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            loss = F.cross_entropy(head(feats), labels)
            loss.backward()
            opt.step()
        return (head(feats).argmax(1) == labels).float().mean().item()

class Harness:
    def validate(self):
        scores = []
        with torch.no_grad():
            for b in batches:
                scores.append(self.step(b))
        return scores

    def step(self, b):
        feats = net(b[0])
        acc = Probe().fit(feats.detach(), b[1])  # <- cause
        return acc

print(Harness().validate())
""",
    # helper functions: evaluate() -> metrics() -> finetune(), with a pass-through wrapper
    "helper_chain_with_wrapper": """
def finetune(feats, labels):
    w = torch.zeros(feats.shape[1], 2, requires_grad=True)
    loss = F.cross_entropy(feats @ w, labels)
    loss.backward()
    return w.grad.norm().item()

def run_finetune(feats, labels):
    return finetune(feats, labels)

def metrics(b):
    feats = torch.tanh(net(b[0]))
    gnorm = run_finetune(feats, b[1])  # <- cause
    return {"gnorm": gnorm}

def evaluate():
    with torch.no_grad():
        return [metrics(b) for b in batches]

print(evaluate())
""",
}

OFF_CALLER_LOOKALIKES = {
    # the per-batch method re-enables grad around the probe: nothing to report
    "enable_grad_around_probe": """
def fit(feats, labels):
    w = torch.zeros(feats.shape[1], 2, requires_grad=True)
    F.cross_entropy(feats @ w, labels).backward()
    return w.grad.norm().item()

def step(b):
    feats = net(b[0])
    with torch.enable_grad():
        return fit(feats, b[1])

with torch.no_grad():
    print([step(b) for b in batches])
""",
    # evaluation under no_grad computes metrics only: nothing to report
    "metrics_only": """
def step(b):
    logits = net(b[0])
    return F.cross_entropy(logits, b[1]).item()

with torch.no_grad():
    print([step(b) for b in batches])
""",
}

# the training code is called straight from the no_grad block: the block stays named
OFF_DIRECT = """
def attack(x, y):
    x = x.clone().requires_grad_(True)
    F.cross_entropy(net(x), y).backward()
    return x.grad.sign()

with torch.no_grad():  # <- cause
    for b in batches:
        print(attack(*b).sum())
"""


@pytest.mark.parametrize("name", sorted(OFF_CALLER_BUGS))
def test_backward_under_callers_no_grad_names_the_call(name, run_script):
    src = OFF_HEAD + OFF_CALLER_BUGS[name]
    res = run_script(src)
    assert res.code != 0
    assert res.findings, res.err
    first = res.findings[0]
    assert (first["code"], first["line"]) == ("GT203", marked_line(src)), res.findings


@pytest.mark.parametrize("name", sorted(OFF_CALLER_LOOKALIKES))
def test_backward_under_callers_no_grad_lookalikes_silent(name, run_script):
    res = run_script(OFF_HEAD + OFF_CALLER_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert res.findings == [], res.findings


def test_backward_called_straight_from_no_grad_block_names_the_block(run_script):
    src = OFF_HEAD + OFF_DIRECT
    res = run_script(src)
    assert res.code != 0
    first = res.findings[0]
    assert (first["code"], first["line"]) == ("GT203", marked_line(src)), res.findings


HVP_HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2))
x, y = torch.randn(10, 6), torch.randint(0, 2, (10,))
"""

HVP_BUGS = {
    # a script loop: curvature probe from the .grad a plain backward() left
    "script_curvature_probe": """
params = list(model.parameters())
for it in range(2):
    model.zero_grad()
    F.cross_entropy(model(x), y).backward()  # <- cause
    vs = [torch.randn_like(p) for p in params]
    hv = torch.autograd.grad([p.grad for p in params], params, grad_outputs=vs)
    print(sum(h.abs().sum() for h in hv))
""",
    # an optimizer's step estimates the Hessian diagonal from the .grad of its parameters
    "optimizer_step_hessian_diag": """
class Curv(torch.optim.Optimizer):
    def __init__(self, params):
        super().__init__(params, dict(lr=0.1))

    @torch.no_grad()
    def step(self):
        ps = [p for g in self.param_groups for p in g["params"] if p.grad is not None]
        vs = [torch.ones_like(p) for p in ps]
        with torch.enable_grad():
            hs = torch.autograd.grad([p.grad for p in ps], ps, grad_outputs=vs)
        for p, h in zip(ps, hs):
            p.sub_(0.1 * p.grad / (h.abs() + 1e-3))

def train(steps):
    opt = Curv(model.parameters())
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()  # <- cause
        opt.step()

train(2)
""",
}

HVP_LOOKALIKES = {
    # create_graph=True: the .grad carries a graph, the probe works
    "create_graph_backward": """
params = list(model.parameters())
model.zero_grad()
loss = F.cross_entropy(model(x), y)
gs = torch.autograd.grad(loss, params, create_graph=True)
hv = torch.autograd.grad(gs, params, grad_outputs=[torch.ones_like(g) for g in gs])
print(sum(h.abs().sum() for h in hv))
""",
    # a plain training step: nothing to report
    "plain_step": """
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(HVP_BUGS))
def test_gradient_of_grad_without_create_graph_names_the_backward(name, run_script):
    src = HVP_HEAD + HVP_BUGS[name]
    res = run_script(src)
    assert res.code != 0
    assert res.findings, res.err
    first = res.findings[0]
    assert (first["code"], first["line"]) == ("GT206", marked_line(src)), res.findings


@pytest.mark.parametrize("name", sorted(HVP_LOOKALIKES))
def test_gradient_of_grad_lookalikes_silent(name, run_script):
    res = run_script(HVP_HEAD + HVP_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert res.findings == [], res.findings


DEAD_HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
x, y = torch.randn(8, 6), torch.randn(8, 2)
"""

DEAD_NO_OPT_BUGS = {
    # a module method: an auxiliary term from the model's own output under no_grad
    "module_aux_term": """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(6, 2)
        self.judge = nn.Linear(2, 1).requires_grad_(False)

    def losses(self, inp, tgt):
        out = self.body(inp)
        with torch.no_grad():  # <- cause (NOTE [block of one statement])
            score = self.judge(torch.tanh(out)).mean()
        return F.mse_loss(out, tgt), score

net = Net()
fit, aux = net.losses(x, y)
total = fit + 0.5 * aux
total.backward()
print(net.body.weight.grad.norm())
""",
    # a script: a smoothness penalty computed without grad from the prediction
    "script_penalty": """
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 2))
pred = model(x)
with torch.no_grad():  # <- cause
    smooth = (pred[1:] - pred[:-1]).abs().mean()
loss = F.l1_loss(pred, y) + smooth
loss.backward()
print([p.grad.norm().item() for p in model.parameters()])
""",
}

DEAD_NO_OPT_LOOKALIKES = {
    # the no_grad term comes from a frozen network's own input: nothing upstream is graded
    "frozen_teacher_target": """
student, teacher = nn.Linear(6, 2), nn.Linear(6, 2).requires_grad_(False)
with torch.no_grad():
    soft = teacher(x).pow(2).mean()
loss = F.mse_loss(student(x), y) + soft
loss.backward()
print(student.weight.grad.norm())
""",
    # the sum with the metric is only logged; backward runs on the live loss alone
    "metric_only_logged": """
model = nn.Linear(6, 2)
pred = model(x)
with torch.no_grad():
    mae = (pred - y).abs().mean()
loss = F.mse_loss(pred, y)
log_total = loss + mae
loss.backward()
print(log_total.item(), model.weight.grad.norm().item())
""",
}


@pytest.mark.parametrize("name", sorted(DEAD_NO_OPT_BUGS))
def test_dead_term_without_optimizer_named(name, run_script):
    src = DEAD_HEAD + DEAD_NO_OPT_BUGS[name]
    res = run_script(src)
    assert res.code == 0, res.err
    assert res.findings, res.err
    first = res.findings[0]
    assert (first["code"], first["line"]) == ("GT844", marked_line(src)), res.findings


@pytest.mark.parametrize("name", sorted(DEAD_NO_OPT_LOOKALIKES))
def test_dead_term_without_optimizer_lookalikes_silent(name, run_script):
    res = run_script(DEAD_HEAD + DEAD_NO_OPT_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert res.findings == [], res.findings


METER_HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
net = nn.Linear(5, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.01)
data = [(torch.randn(4, 5), torch.randn(4, 1)) for _ in range(12)]
"""

METER_BUGS = {
    # a running-mean class whose push() adds what it is given
    "meter_class_push": """
class RunningMean:
    def __init__(self):
        self.acc, self.n = torch.zeros(()), 0

    def push(self, v):
        self.acc += v
        self.n += 1

meter = RunningMean()
for xb, yb in data:
    opt.zero_grad()
    loss = F.mse_loss(net(xb), yb)
    loss.backward()
    opt.step()
    meter.push(loss)  # <- cause
print(meter.acc / meter.n)
""",
    # a helper function adds into a dict of totals; a trainer method calls it
    "helper_adds_into_dict": """
def accumulate(logs, key, value):
    logs[key] += value

class Trainer:
    def __init__(self):
        self.logs = {"loss": torch.zeros(())}

    def epoch(self):
        for xb, yb in data:
            opt.zero_grad()
            loss = F.mse_loss(net(xb), yb)
            loss.backward()
            opt.step()
            accumulate(self.logs, "loss", loss * len(xb))  # <- cause

t = Trainer()
t.epoch()
print(t.logs)
""",
}

METER_LOOKALIKES = {
    "meter_given_item": """
class RunningMean:
    def __init__(self):
        self.acc, self.n = 0.0, 0

    def push(self, v):
        self.acc += v
        self.n += 1

meter = RunningMean()
for xb, yb in data:
    opt.zero_grad()
    loss = F.mse_loss(net(xb), yb)
    loss.backward()
    opt.step()
    meter.push(loss.item())
print(meter.acc / meter.n)
""",
    "meter_detaches": """
class RunningMean:
    def __init__(self):
        self.acc, self.n = torch.zeros(()), 0

    def push(self, v):
        self.acc += v.detach()
        self.n += 1

meter = RunningMean()
for xb, yb in data:
    opt.zero_grad()
    loss = F.mse_loss(net(xb), yb)
    loss.backward()
    opt.step()
    meter.push(loss)
print(meter.acc / meter.n)
""",
}


@pytest.mark.parametrize("name", sorted(METER_BUGS))
def test_running_total_in_a_helper_names_the_caller(name, run_script):
    src = METER_HEAD + METER_BUGS[name]
    res = run_script(src)
    assert res.code == 0, res.err
    assert res.findings, res.err
    first = res.findings[0]
    assert (first["code"], first["line"]) == ("GT505", marked_line(src)), res.findings


@pytest.mark.parametrize("name", sorted(METER_LOOKALIKES))
def test_running_total_in_a_helper_lookalikes_silent(name, run_script):
    res = run_script(METER_HEAD + METER_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert res.findings == [], res.findings


# a program with no backward() at all: the hook is the stray part, the registration stays named
HOOK_NO_GRADIENTS = """
class Recorder:
    def __init__(self, layer):
        self.grads = []
        layer.register_forward_hook(self.on_forward)

    def on_forward(self, module, inp, out):
        out.register_hook(self.grads.append)  # <- cause

rec = Recorder(net[0])
with torch.no_grad():
    print(net(x).shape)
"""


def test_hook_in_a_program_without_gradients_stays_at_the_registration(run_script):
    src = HOOK_HEAD + HOOK_NO_GRADIENTS
    res = run_script(src)
    assert res.code != 0
    first = res.findings[0]
    assert (first["code"], first["line"]) == ("GT833", marked_line(src)), res.findings
