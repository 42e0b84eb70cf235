"""Session-24 run-time diagnoses, round 2 (docs/triage/runtime25.md):

- NOTE [grad-free wrapper] (runtime/trace/detach_wrapper.py): a method that detaches every input
  it is handed and returns ``self.<method>(...)`` (a metric's ``__call__``) is a grad-free entry
  point by contract: the cut is named at the line that called it where a graph was needed;
- NOTE [grad off on the stack] (runtime/trace/offstack.py), last case: a method that calls
  ``self.eval()`` and whose body is a ``with torch.no_grad():`` around the object's own forward
  (``self(x)``, ``self.forward(x)``) then ``return`` (smp's ``predict``) names its caller, as a
  grad-off decorator does.

Buggy twins (code + line asserted), twins whose own line stays the cause, and silent
look-alikes. Real torch, in-process: every bug below crashes at backward() on real torch.
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

METRIC = """
class DiceMetric:
    def __init__(self, eps=1e-6):
        self.eps = eps

    def __call__(self, pred, target=None):
        t = target.detach() if isinstance(target, torch.Tensor) else None
        return self.compute(pred.detach(), t)

    def compute(self, p, t):
        p = torch.sigmoid(p)
        t = torch.ones_like(p) if t is None else t
        return (2 * (p * t).sum() + self.eps) / (p.sum() + t.sum() + self.eps)
"""

PREDICTOR = """
class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))

    def forward(self, x):
        return self.body(x)

    def predict_proba(self, x):
        self.eval()
        with torch.no_grad():
            logits = self(x)
            probs = logits.softmax(-1)
        return probs
"""

WRAPPER_BUGS = {
    # a metric's grad-free __call__ used as the training loss (MONAI's SSIMLoss shape)
    "metric_call_as_loss": METRIC + """
net = nn.Conv2d(1, 1, 3, padding=1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
dice = DiceMetric()
for _ in range(2):
    x, y = torch.randn(2, 1, 8, 8), (torch.rand(2, 1, 8, 8) > 0.5).float()
    loss = 1 - dice(net(x), y)  # <- cause
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    # the same wrapper reached from a loss module's forward
    "metric_call_inside_loss_module": METRIC + """
class DiceLoss(nn.Module):
    def forward(self, pred, target):
        score = DiceMetric()(pred, target)  # <- cause
        return 1 - score


net = nn.Conv2d(1, 1, 3, padding=1)
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
crit = DiceLoss()
x, y = torch.randn(2, 1, 8, 8), (torch.rand(2, 1, 8, 8) > 0.5).float()
loss = crit(net(x), y)
opt.zero_grad()
loss.backward()
opt.step()
""",
    # a classifier's no-grad predict_proba trained on (smp predict / Captum wrapper shape)
    "no_grad_predict_trained_on": PREDICTOR + """
model = Classifier()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
model.train()
probs = model.predict_proba(x)  # <- cause
loss = F.nll_loss(probs.clamp_min(1e-6).log(), y)
opt.zero_grad()
loss.backward()
opt.step()
""",
    # the same method spelled with self.forward, called from a helper that builds the loss
    "no_grad_infer_forward_in_helper": """
class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 2)

    def forward(self, s):
        return self.net(s).log_softmax(-1)

    def infer(self, s):
        self.train(False)
        with torch.no_grad():
            return self.forward(s)


def policy_loss(policy, states, actions, returns):
    logp = policy.infer(states)  # <- cause
    return -(logp.gather(1, actions[:, None]).squeeze(1) * returns).mean()


policy = Policy()
opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
s, a, r = torch.randn(5, 4), torch.randint(0, 2, (5,)), torch.randn(5)
loss = policy_loss(policy, s, a, r)
opt.zero_grad()
loss.backward()
opt.step()
""",
}

# the helper's own line is the cause: it reads an input plainly (only one is detached), or its
# no_grad block runs a submodule, not the object's own forward
OWN_LINE_BUGS = {
    "helper_detaches_one_input": """
class Trainer:
    def __init__(self, net):
        self.net = net

    def loss_of(self, pred, target):
        return self.mse(pred.detach(), target)  # <- cause

    def mse(self, a, b):
        return ((a - b) ** 2).mean()


net = nn.Linear(3, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
tr = Trainer(net)
x, y = torch.randn(4, 3), torch.randn(4, 1)
loss = tr.loss_of(net(x), y)
opt.zero_grad()
loss.backward()
opt.step()
""",
    # an RL select_action under no_grad without eval(): the fix keeps the graph in the method
    "no_grad_select_action_without_eval": """
class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, s):
        return self.fc(s)

    def act(self, s):
        with torch.no_grad():  # <- cause
            return torch.distributions.Categorical(logits=self(s))


def step(policy, states):
    dist = policy.act(states)
    a = dist.sample()
    return -dist.log_prob(a).mean()


policy = Policy()
loss = step(policy, torch.randn(5, 4))
loss.backward()
""",
    "no_grad_block_runs_a_submodule": """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(4, 4)
        self.head = nn.Linear(4, 1)

    def forward(self, x):
        return self.head(x)

    def encode(self, x):
        with torch.no_grad():  # <- cause
            return self.encoder(x)


net = Net()
opt = torch.optim.SGD(net.encoder.parameters(), lr=0.1)
x = torch.randn(3, 4)
loss = net.encode(x).pow(2).mean()
opt.zero_grad()
loss.backward()
opt.step()
""",
}

LOOKALIKES = {
    # the grad-free metric logged beside a real loss
    "metric_logged_beside_loss": METRIC + """
net = nn.Conv2d(1, 1, 3, padding=1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
dice = DiceMetric()
for _ in range(2):
    x, y = torch.randn(2, 1, 8, 8), (torch.rand(2, 1, 8, 8) > 0.5).float()
    out = net(x)
    loss = F.binary_cross_entropy_with_logits(out, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("dice", float(dice(out, y)))
""",
    # predict_proba used to evaluate, the loss from the forward pass
    "predict_for_evaluation": PREDICTOR + """
model = Classifier()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
for _ in range(2):
    model.train()
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    acc = (model.predict_proba(x).argmax(-1) == y).float().mean()
    print("acc", acc.item())
""",
}


def _run_finding(res):
    found = [f for f in res.findings if f["source"] != "static"]
    assert found, res.err
    return found[0]


def _run_line(f):
    """The line the run itself named: the finding's, or (fused into a static finding that
    keeps its own line) the one of its "confirmed at run time" entry."""
    return next((r["line"] for r in f["related"] if r["message"].startswith("confirmed at run")),
                f["line"])


@pytest.mark.parametrize("name", sorted(WRAPPER_BUGS))
def test_grad_free_wrapper_names_its_caller(run_script, name):
    src = HEAD + WRAPPER_BUGS[name]
    res = run_script(src)
    assert res.code != 0, res.err  # real torch: backward() of a tensor without grad_fn
    f = _run_finding(res)
    assert _run_line(f) == marked_line(src), res.err
    assert f["code"] in ("GT107", "GT201", "GT202"), res.err


@pytest.mark.parametrize("name", sorted(OWN_LINE_BUGS))
def test_helper_that_is_not_a_wrapper_keeps_its_own_line(run_script, name):
    src = HEAD + OWN_LINE_BUGS[name]
    res = run_script(src)
    assert res.code != 0, res.err
    f = _run_finding(res)
    assert _run_line(f) == marked_line(src), res.err
    assert f["code"] in ("GT107", "GT201", "GT202"), res.err


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_grad_free_wrapper_used_for_its_purpose_is_silent(run_script, name):
    res = run_script(HEAD + LOOKALIKES[name])
    assert res.code == 0, res.err
    assert [f for f in res.findings if f["source"] != "static"] == [], res.err


def test_wrapper_message_names_the_detach_inside(run_script):
    res = run_script(HEAD + WRAPPER_BUGS["metric_call_as_loss"])
    f = _run_finding(res)
    assert "DiceMetric.__call__" in f["message"], f["message"]


# ---- an adaptive optimizer whose eps is 0 in float16 (NOTE [eps below the dtype]) ----------

EPS_MODEL = """
class TextHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(40, 16)
        self.out = nn.Linear(16, 4)

    def forward(self, tokens):
        return self.out(self.emb(tokens).mean(1))


def train(model, opt, steps=6):
    tokens, y = torch.randint(0, 10, (8, 5)), torch.randint(0, 4, (8,))
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(tokens).float(), y)
        loss.backward()
        opt.step()
    print("loss", loss.item())
"""

EPS_BUGS = {
    "adam_on_half_model": EPS_MODEL + """
model = TextHead().half()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)  # <- cause
train(model, opt)
""",
    "rmsprop_built_in_a_helper": EPS_MODEL + """
def make_optimizer(model):
    return torch.optim.RMSprop(model.parameters(), lr=1e-3)  # <- cause


model = TextHead().to(torch.float16)
optimizer = make_optimizer(model)
train(model, optimizer)
""",
}

EPS_LOOKALIKES = {
    "adam_half_with_eps_it_can_hold": EPS_MODEL + """
model = TextHead().half()
opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-4)
train(model, opt)
""",
    "adam_bfloat16_default_eps": EPS_MODEL + """
model = TextHead().to(torch.bfloat16)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
train(model, opt)
""",
}


@pytest.mark.parametrize("name", sorted(EPS_BUGS))
def test_eps_zero_in_float16_names_the_optimizer(run_script, name):
    src = HEAD + EPS_BUGS[name]
    res = run_script(src)
    f = _run_finding(res)
    assert (f["code"], f["line"]) == ("GT858", marked_line(src)), res.err


@pytest.mark.parametrize("name", sorted(EPS_LOOKALIKES))
def test_eps_the_dtype_holds_is_silent(run_script, name):
    res = run_script(HEAD + EPS_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert [f for f in res.findings if f["source"] != "static"] == [], res.err


def test_eps_zero_in_float16_on_real_torch():
    """The torch fact: 1e-8 is 0 in float16 (not in bfloat16), and one Adam step on float16
    weights whose gradient has zeros (an unused embedding row) writes NaN; eps=1e-4 does not."""
    import torch

    assert float(torch.tensor(1e-8, dtype=torch.float16)) == 0.0
    assert float(torch.tensor(1e-8, dtype=torch.bfloat16)) != 0.0
    for eps, broken in ((1e-8, True), (1e-4, False)):
        torch.manual_seed(0)
        emb = torch.nn.Embedding(6, 3).half()
        opt = torch.optim.Adam(emb.parameters(), lr=1e-3, eps=eps)
        emb(torch.tensor([0, 1])).float().sum().backward()
        assert bool(torch.isfinite(emb.weight.grad).all())
        opt.step()
        assert (not bool(torch.isfinite(emb.weight).all())) is broken


# ---- a second loss built after the step from a value whose graph is freed ------------------
# (NOTE [second loss on a stepped graph], runtime/trace/stepped_reuse.py)

STALE_BUG = """
enc, head = nn.Linear(6, 8), nn.Linear(8, 1)
opt = torch.optim.SGD([*enc.parameters(), *head.parameters()], lr=0.1)
for it in range(3):
    x = torch.randn(4, 6)
    feats = enc(x)
    loss = head(feats).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    if it == 1:
        reg = feats.pow(2).mean() * 0.01  # <- cause
        reg.backward()
        opt.step()
        opt.zero_grad()
"""

STALE_FIXED = STALE_BUG.replace("reg = feats.pow(2)", "reg = enc(x).pow(2)")

GAN_BUG = """
G, D = nn.Linear(3, 4), nn.Linear(4, 1)
g_opt, d_opt = torch.optim.SGD(G.parameters(), lr=0.1), torch.optim.SGD(D.parameters(), lr=0.1)
for _ in range(2):
    fake = G(torch.randn(5, 3))
    d_loss = D(fake).mean() - D(torch.randn(5, 4)).mean()  # <- cause
    d_opt.zero_grad()
    d_loss.backward()
    d_opt.step()
    g_loss = -D(fake).mean()
    g_opt.zero_grad()
    g_loss.backward()
    g_opt.step()
"""


def test_second_loss_on_a_stepped_graph_names_the_stale_use(run_script):
    src = HEAD + STALE_BUG
    res = run_script(src)
    assert res.code != 0 and "second time" in res.err, res.err  # real torch
    f = _run_finding(res)
    assert _run_line(f) == marked_line(src), res.err


def test_second_loss_on_a_fresh_forward_is_silent(run_script):
    res = run_script(HEAD + STALE_FIXED)
    assert res.code == 0, res.err
    assert [f for f in res.findings if f["source"] != "static"] == [], res.err


def test_gan_whose_other_optimizer_stepped_keeps_the_detach_lead(run_script):
    """The step in between (D's) holds none of the freed graph's parameters (G's)."""
    src = HEAD + GAN_BUG
    res = run_script(src)
    f = _run_finding(res)
    assert _run_line(f) == marked_line(src), res.err


TWO_HOOKS = """
net = nn.Linear(4, 2)
opt = torch.optim.SGD(net.parameters(), lr=0.1)


class StepHook:
    def after_iter(self, out):
        out["loss"].backward()
        opt.step()
        opt.zero_grad()


class AccumulateHook:
    def after_iter(self, out):
        (out["loss"] / 2).backward()


hooks = [StepHook(), AccumulateHook()]
for _ in range(2):
    out = {"loss": F.cross_entropy(net(torch.randn(3, 4)), torch.tensor([0, 1, 1]))}
    for h in hooks:
        h.after_iter(out)
"""


def test_the_loss_itself_backpropagated_again_is_not_a_stale_value(run_script):
    """Two hooks each calling backward() on one loss (mmcv#1379's shape): the freed node is the
    loss's own root, nothing consumed a value of its graph; the stale-value reading is wrong."""
    res = run_script(HEAD + TWO_HOOKS)
    assert res.code != 0 and "second time" in res.err, res.err
    f = _run_finding(res)
    assert "is stale" not in f["message"], res.err
