"""Session-24 run-time diagnoses (docs/triage/runtime24.md):

- NOTE [backward of a leaf] (runtime/trace/root_leaf.py): the tensor handed to backward() is
  a new leaf (``torch.tensor(loss.item(), requires_grad=True)``, ``loss.detach()
  .requires_grad_()``): the cut that made it leads the parameters' "never received a
  gradient", before a cut the same parameters met elsewhere (an ``argmax`` in an accuracy
  check run first), and it covers every layer trained by the same line;
- a crash no finding explains is headed as the error itself, separate from the problems the
  run saw, never as "gradtrace: diagnosis".

Buggy twins (code + line asserted) and silent look-alikes. Real torch, in-process.
"""
from __future__ import annotations

import pytest
from rt_helpers import marked_line

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
"""


def _first(res):
    assert res.findings, res.err
    return res.findings[0]


# ---- backward() handed a leaf ---------------------------------------------------------------

LEAF_ROOT_BUGS = {
    # forward-forward: each layer trains alone on its goodness; the loss is rewrapped from its
    # number, and the net's prediction (argmax over labels) runs before the training
    "forward_forward_item_rewrapped": """
class Layer(nn.Linear):
    def __init__(self, i, o):
        super().__init__(i, o)
        self.opt = torch.optim.Adam(self.parameters(), lr=0.03)

    def forward(self, x):
        x = x / (x.norm(2, 1, keepdim=True) + 1e-4)
        return torch.relu(super().forward(x))

    def train_layer(self, x_pos, x_neg):
        for _ in range(3):
            g_pos = self.forward(x_pos).pow(2).mean(1)
            g_neg = self.forward(x_neg).pow(2).mean(1)
            loss = torch.log(1 + torch.exp(torch.cat([-g_pos + 2.0, g_neg - 2.0]))).mean()
            loss = torch.tensor(loss.item(), requires_grad=True)  # <- cause
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
        return self.forward(x_pos).detach(), self.forward(x_neg).detach()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Layer(12, 16), Layer(16, 16)])

    def predict(self, x):
        good = []
        for label in range(3):
            h = x.clone()
            h[:, :3] = 0
            h[:, label] = 1
            g = []
            for layer in self.layers:
                h = layer(h)
                g.append(h.pow(2).mean(1))
            good.append(sum(g).unsqueeze(1))
        return torch.cat(good, 1).argmax(1)

    def train_net(self, x_pos, x_neg):
        h_pos, h_neg = x_pos, x_neg
        for layer in self.layers:
            h_pos, h_neg = layer.train_layer(h_pos, h_neg)


net = Net()
x = torch.randn(16, 12)
print("before", net.predict(x).float().mean().item())
net.train_net(x, torch.randn(16, 12))
print("after", net.predict(x).float().mean().item())
""",
    # a script: the accuracy of an untrained model first, then a loop whose loss is detached
    # and made to require grad so that backward() does not raise
    "script_detached_requires_grad": """
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))


def accuracy():
    return (model(x).argmax(1) == y).float().mean().item()


print(accuracy())
for epoch in range(3):
    loss = F.cross_entropy(model(x), y)
    loss = loss.detach().requires_grad_()  # <- cause
    opt.zero_grad()
    loss.backward()
    opt.step()
print(accuracy())
""",
    # a trainer: float() of the loss, rewrapped with requires_grad=True on the next line: the
    # float() made the number (GT102's line, static and run; the demo's convention)
    "trainer_float_rewrapped": """
class Trainer:
    def __init__(self):
        self.net = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 2))
        self.opt = torch.optim.Adam(self.net.parameters(), lr=1e-2)

    def evaluate(self, x, y):
        return (self.net(x).argmax(-1) == y).sum().item()

    def step(self, x, y):
        value = float(F.cross_entropy(self.net(x), y))  # <- cause
        loss = torch.tensor(value, requires_grad=True)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return value


t = Trainer()
x, y = torch.randn(20, 5), torch.randint(0, 2, (20,))
t.evaluate(x, y)
for _ in range(3):
    t.step(x, y)
""",
}

LEAF_ROOT_LOOKALIKES = {
    # a learnt loss weight initialised from the first loss's value: a leaf the optimizer holds,
    # used in the loss; backward() is on the real loss, whose graph reaches every parameter
    "learnt_weight_from_first_loss": """
model = nn.Linear(4, 1)
x, y = torch.randn(16, 4), torch.randn(16, 1)
first = F.mse_loss(model(x), y)
log_var = torch.tensor(first.item(), requires_grad=True)
opt = torch.optim.SGD([*model.parameters(), log_var], lr=0.01)
print((model(x).argmax(0)).item())
for _ in range(3):
    loss = F.mse_loss(model(x), y) * torch.exp(-log_var) + log_var
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    # an evaluation with argmax before a correct loop that logs its loss's number
    "accuracy_then_correct_loop": """
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))
print((model(x).argmax(1) == y).float().mean().item())
history = []
for epoch in range(3):
    loss = F.cross_entropy(model(x), y)
    history.append(torch.tensor(loss.item()))
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(LEAF_ROOT_BUGS))
def test_backward_of_a_leaf_names_the_line_that_made_it(run_script, name):
    src = HEAD + LEAF_ROOT_BUGS[name]
    res = run_script(src)
    f = _first(res)
    assert f["line"] == marked_line(src), res.err
    assert f["code"] in ("GT102", "GT107", "GT106"), res.err
    # one line for every layer the same statement trained (forward-forward's two layers)
    assert [g["line"] for g in res.findings if g["source"] != "static"].count(f["line"]) == 1
    assert all("never received" not in g["message"] for g in res.findings[1:]
               if g["source"] != "static"), res.err


@pytest.mark.parametrize("name", sorted(LEAF_ROOT_LOOKALIKES))
def test_backward_of_a_real_loss_is_silent(run_script, name):
    res = run_script(HEAD + LEAF_ROOT_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert [f for f in res.findings if f["source"] != "static"] == [], res.err


# ---- a crash no finding explains ------------------------------------------------------------

CRASH_AFTER_CUT = """
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 4), torch.randn(8, 2)
for step in range(3):
    h = model[0](x).detach()  # <- cause
    loss = F.mse_loss(model[2](torch.relu(h)), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
z = torch.randn(3, 4) @ torch.randn(5, 2)  # <- crash
"""


def test_unexplained_crash_is_not_headed_as_a_diagnosis(run_script):
    src = HEAD + CRASH_AFTER_CUT
    res = run_script(src)
    assert res.code != 0
    assert "gradtrace: diagnosis" not in res.err, res.err
    assert "the error itself, separate from the problems above" in res.err, res.err
    seen = [f for f in res.findings if f["source"] != "static"]
    assert seen[0]["line"] == marked_line(src), res.err
    assert seen[-1]["code"] == "GT839" and seen[-1]["line"] == marked_line(src, "# <- crash")
    assert res.err.index("problems seen") < res.err.index("the error itself")


def test_unexplained_crash_alone_is_the_error_itself(run_script):
    src = HEAD + CRASH_AFTER_CUT.replace(".detach()  # <- cause", "")
    res = run_script(src)
    assert "gradtrace: diagnosis" not in res.err, res.err
    assert "gradtrace: the error itself (1): no specific diagnosis applies" in res.err, res.err


def test_explained_crash_keeps_its_diagnosis_heading(run_script):
    src = HEAD + """
model = nn.Linear(4, 2)
x = torch.randn(8, 4)
loss = model(x).detach().pow(2).mean()  # <- cause
loss.backward()
"""
    res = run_script(src)
    assert "gradtrace: diagnosis (" in res.err, res.err
    assert _first(res)["line"] == marked_line(src), res.err


# ---- gradients taken without a graph, made into a loss term --------------------------------

GRAD_PENALTY_BUGS = {
    # a WGAN-GP critic step: the penalty's gradient w.r.t. the interpolates has no graph
    "critic_gradient_penalty": """
critic = nn.Sequential(nn.Linear(4, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
opt = torch.optim.Adam(critic.parameters(), lr=1e-3)


def gradient_penalty(real, fake):
    alpha = torch.rand(real.size(0), 1)
    mixed = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    out = critic(mixed)
    grad = torch.autograd.grad(out.sum(), mixed)[0]  # <- cause
    return ((grad.norm(2, dim=1) - 1) ** 2).mean()


for _ in range(3):
    real, fake = torch.randn(8, 4) + 1, torch.randn(8, 4)
    loss = critic(fake).mean() - critic(real).mean() + 10.0 * gradient_penalty(real, fake)
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    # a trainer adding a parameter-gradient norm penalty (sharpness-style) to its loss
    "trainer_weight_gradient_norm": """
class Trainer:
    def __init__(self):
        self.model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1))
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05)

    def step(self, x, y):
        loss = F.mse_loss(self.model(x), y)
        grads = torch.autograd.grad(loss, list(self.model.parameters()),  # <- cause
                                    retain_graph=True)
        penalty = sum(g.pow(2).sum() for g in grads)
        total = loss + 0.1 * penalty
        self.opt.zero_grad()
        total.backward()
        self.opt.step()


t = Trainer()
for _ in range(3):
    t.step(torch.randn(16, 5), torch.randn(16, 1))
""",
}

GRAD_PENALTY_LOOKALIKES = {
    # the same penalty with create_graph=True
    "critic_gradient_penalty_with_graph": GRAD_PENALTY_BUGS["critic_gradient_penalty"].replace(
        "torch.autograd.grad(out.sum(), mixed)[0]  # <- cause",
        "torch.autograd.grad(out.sum(), mixed, create_graph=True)[0]"),
    # first-order MAML: the inner step's gradient has no graph on purpose
    "first_order_maml": """
w = nn.Parameter(torch.randn(4, 1) * 0.1)
opt = torch.optim.Adam([w], lr=1e-2)
for _ in range(3):
    xs, ys, xq, yq = torch.randn(8, 4), torch.randn(8, 1), torch.randn(8, 4), torch.randn(8, 1)
    inner = F.mse_loss(xs @ w, ys)
    (g,) = torch.autograd.grad(inner, [w])
    fast = w - 0.1 * g
    outer = F.mse_loss(xq @ fast, yq)
    opt.zero_grad()
    outer.backward()
    opt.step()
""",
    # FGSM adversarial training, and a gradient norm kept for the logs only
    "fgsm_and_logged_grad_norm": """
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
log = []
for _ in range(3):
    x, y = torch.randn(8, 6).requires_grad_(), torch.randint(0, 3, (8,))
    clean = F.cross_entropy(model(x), y)
    (gx,) = torch.autograd.grad(clean, x, retain_graph=True)
    adv = F.cross_entropy(model((x + 0.1 * gx.sign()).detach()), y)
    loss = clean + adv
    log.append((loss + gx.norm()).item())
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(GRAD_PENALTY_BUGS))
def test_gradient_penalty_without_graph_names_the_grad_call(run_script, name):
    src = HEAD + GRAD_PENALTY_BUGS[name]
    res = run_script(src)
    f = _first(res)
    assert (f["code"], f["line"]) == ("GT206", marked_line(src)), res.err
    assert f["source"] != "static", res.err  # the run saw it (the static GT206 may not)


@pytest.mark.parametrize("name", sorted(GRAD_PENALTY_LOOKALIKES))
def test_gradients_without_graph_used_otherwise_are_silent(run_script, name):
    res = run_script(HEAD + GRAD_PENALTY_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert [f for f in res.findings if f["source"] != "static"] == [], res.err


def test_gradient_penalty_twin_on_real_torch():
    """The fact the twin rests on: without create_graph the penalty's gradient is gone."""
    import torch

    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 1)
    x = torch.randn(5, 3, requires_grad=True)
    (g,) = torch.autograd.grad(lin(x).pow(2).sum(), x)
    assert not g.requires_grad
    penalty = g.pow(2).sum()
    (lin(x).sum() + penalty).backward()
    plain = lin.weight.grad.clone()
    lin.weight.grad = None
    lin(x).sum().backward()
    assert torch.equal(plain, lin.weight.grad)
