"""What a loss was fed and where the graph was cut, read from observation (issue 13, helper
lossinput): the node that made a loss's input (NOTE [loss input]), a copy into a new leaf and a
term through an op without derivative (NOTE [copied leaf], NOTE [dead loss term]), a custom
Function whose backward returns None (NOTE [custom Function returning None]). Real torch; each
bug has twins in other spellings and structure, and a look-alike that stays silent."""
from __future__ import annotations

import pytest

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
"""

# name -> (code, body); the line named first carries `# C`, related lines `# R`
BUGS = {
    # -- a loss fed the wrong kind of value (the node decides, whatever the spelling) -------------
    "kl_div_method_softmax_inline": ("GT836", """
net = nn.Linear(6, 4)
opt = torch.optim.Adam(net.parameters(), lr=0.01)
teacher = torch.randn(8, 4).softmax(-1)
for _ in range(3):
    crit = nn.KLDivLoss(reduction="batchmean")
    loss = crit(net(torch.randn(8, 6)).softmax(-1), teacher)  # C
    opt.zero_grad(); loss.backward(); opt.step()
"""),
    "kl_div_model_ends_in_softmax_module": ("GT836", """
student = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 4), nn.Softmax(dim=1))  # C
optim = torch.optim.SGD(student.parameters(), lr=0.1)
for _ in range(3):
    probs = student(torch.randn(5, 6))
    target = F.softmax(torch.randn(5, 4), dim=1)
    d = F.kl_div(probs, target, reduction="batchmean")  # R
    optim.zero_grad(); d.backward(); optim.step()
"""),
    "kl_div_of_exp_by_value": ("GT836", """
enc = nn.Linear(3, 5)
o = torch.optim.SGD(enc.parameters(), lr=0.1)
def distill(a, b):
    return torch.kl_div(a, b).mean()  # C
for _ in range(2):
    p = torch.exp(F.log_softmax(enc(torch.randn(4, 3)), -1))
    l = distill(p, F.softmax(torch.randn(4, 5), -1))
    o.zero_grad(); l.backward(); o.step()
"""),
    "cross_entropy_after_helper_softmax": ("GT758", """
def predict(m, x):
    return F.softmax(m(x), dim=-1)  # C
clf = nn.Linear(10, 3)
sgd = torch.optim.SGD(clf.parameters(), lr=0.1)
for _ in range(3):
    out = predict(clf, torch.randn(16, 10))
    loss = nn.CrossEntropyLoss()(out, torch.randint(0, 3, (16,)))
    sgd.zero_grad(); loss.backward(); sgd.step()
"""),
    "nll_loss_on_softmax_viewed": ("GT758", """
class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(7, 3)
    def forward(self, x):
        return torch.softmax(self.fc(x), 1)  # C
h = Head()
adam = torch.optim.Adam(h.parameters())
for _ in range(2):
    p = h(torch.randn(2, 4, 7).view(8, 7)).view(2, 4, 3).reshape(8, 3)
    loss = F.nll_loss(p, torch.randint(0, 3, (8,)))
    adam.zero_grad(); loss.backward(); adam.step()
"""),
    "bce_with_logits_after_sigmoid_module": ("GT837", """
disc = nn.Sequential(nn.Linear(4, 1), nn.Sigmoid())  # C
opt_d = torch.optim.SGD(disc.parameters(), lr=0.1)
crit = nn.BCEWithLogitsLoss()
for _ in range(3):
    score = disc(torch.randn(6, 4))
    loss = crit(score, torch.ones(6, 1))
    opt_d.zero_grad(); loss.backward(); opt_d.step()
"""),
    # -- cuts seen from observation ---------------------------------------------------------------
    "new_leaf_by_torch_tensor_in_helper": ("GT104", """
def keep(t):
    return torch.tensor(t, requires_grad=True)  # C
enc = nn.Linear(5, 3)
opt = torch.optim.SGD(enc.parameters(), lr=0.1)
for _ in range(3):
    z = enc(torch.randn(4, 5))
    feat = keep(z)
    loss = F.mse_loss(z, torch.zeros(4, 3)) + feat.pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
"""),
    "new_leaf_copy_is_the_only_path": ("GT820", """
enc = nn.Linear(5, 3)
opt = torch.optim.SGD(enc.parameters(), lr=0.1)
for _ in range(3):
    z = enc(torch.randn(4, 5))
    feat = z.new_tensor(z, requires_grad=True)  # C
    loss = F.mse_loss(feat, torch.zeros(4, 3))
    opt.zero_grad(); loss.backward(); opt.step()
"""),
    "histc_term_in_module_loss": ("GT844", """
class Loss(nn.Module):
    def forward(self, pred, ref):
        a = torch.histc(pred, bins=8, min=0.0, max=1.0)  # C
        b = torch.histc(ref, bins=8, min=0.0, max=1.0)
        return F.mse_loss(pred, ref) + 0.1 * (a - b).abs().mean()
net = nn.Sequential(nn.Linear(4, 4), nn.Sigmoid())
opt = torch.optim.Adam(net.parameters())
crit = Loss()
for _ in range(3):
    loss = crit(net(torch.randn(8, 4)), torch.rand(8, 4))
    opt.zero_grad(); loss.backward(); opt.step()
"""),
    # -- a custom Function whose backward returns None ---------------------------------------------
    "function_backward_returns_none_for_weight": ("GT845", """
class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w
    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gx = g * w
        return gx, None  # C
w = nn.Parameter(torch.ones(3))
lin = nn.Linear(3, 3)
opt = torch.optim.SGD([w, *lin.parameters()], lr=0.1)
for _ in range(2):
    loss = Scale.apply(lin(torch.randn(4, 3)), w).sum()
    opt.zero_grad(); loss.backward(); opt.step()
"""),
    "function_backward_recomputes_without_enable_grad": ("GT845", """
class Energy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inp, scale):
        ctx.save_for_backward(inp, scale)
        return (inp * scale).pow(2).sum()

    @staticmethod
    def backward(ctx, grad_out):
        inp, scale = ctx.saved_tensors
        inp = inp.detach().requires_grad_()
        e = (inp * scale).pow(2).sum()  # C
        e.requires_grad_()
        g, = torch.autograd.grad(e, [scale], grad_out, allow_unused=True)  # R
        return None, g

net = nn.Linear(3, 3)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(2):
    loss = Energy.apply(torch.randn(2, 3), net(torch.randn(2, 3)))
    opt.zero_grad(); loss.backward(); opt.step()
"""),
}

# name -> (code, body): crashes, the finding attached to the exception
CRASHES = {
    "bce_on_raw_linear_scores": ("GT838", """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.out = nn.Linear(4, 1)
    def forward(self, x):
        return self.out(torch.relu(self.body(x))) * 5  # C
net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
y = net(torch.randn(8, 4))
loss = F.binary_cross_entropy(y, torch.ones(8, 1))
"""),
}

LOOKALIKES = {
    "kl_div_on_log_softmax": """
net = nn.Linear(6, 4)
opt = torch.optim.Adam(net.parameters(), lr=0.01)
teacher = torch.randn(8, 4).softmax(-1)
for _ in range(3):
    loss = nn.KLDivLoss(reduction="batchmean")(net(torch.randn(8, 6)).log_softmax(-1), teacher)
    opt.zero_grad(); loss.backward(); opt.step()
""",
    "softmax_for_a_metric_logits_to_the_loss": """
clf = nn.Sequential(nn.Linear(10, 3))
sgd = torch.optim.SGD(clf.parameters(), lr=0.1)
for _ in range(3):
    logits = clf(torch.randn(16, 10))
    y = torch.randint(0, 3, (16,))
    probs = F.softmax(logits, dim=-1)
    acc = (probs.argmax(-1) == y).float().mean()
    loss = F.cross_entropy(logits, y) + F.nll_loss(F.log_softmax(logits, -1), y)
    sgd.zero_grad(); loss.backward(); sgd.step()
""",
    "log_softmax_into_cross_entropy_is_the_same": """
clf = nn.Linear(10, 3)
sgd = torch.optim.SGD(clf.parameters(), lr=0.1)
for _ in range(3):
    loss = F.cross_entropy(F.log_softmax(clf(torch.randn(16, 10)), -1), torch.randint(0, 3, (16,)))
    sgd.zero_grad(); loss.backward(); sgd.step()
""",
    "sigmoid_into_bce_and_logits_into_bce_with_logits": """
disc = nn.Linear(4, 1)
opt_d = torch.optim.SGD(disc.parameters(), lr=0.1)
for _ in range(3):
    s = disc(torch.randn(6, 4))
    loss = F.binary_cross_entropy(torch.sigmoid(s), torch.ones(6, 1)) + \\
        F.binary_cross_entropy_with_logits(s, torch.zeros(6, 1))
    opt_d.zero_grad(); loss.backward(); opt_d.step()
""",
    "histc_statistic_logged_not_in_loss": """
net = nn.Sequential(nn.Linear(4, 4), nn.Sigmoid())
opt = torch.optim.Adam(net.parameters())
stats = []
for _ in range(3):
    out = net(torch.randn(8, 4))
    hist = torch.histc(out, bins=8, min=0.0, max=1.0)
    stats.append(hist / hist.sum())
    logged = F.mse_loss(out, torch.rand(8, 4)) + hist.max() / 8
    loss = F.mse_loss(out, torch.rand(8, 4))
    opt.zero_grad(); loss.backward(); opt.step()
""",
    "copy_trained_itself_as_a_new_parameter": """
enc = nn.Linear(5, 3)
z = enc(torch.randn(4, 5))
extra = z.new_tensor(z, requires_grad=True)
opt = torch.optim.SGD([*enc.parameters(), extra], lr=0.1)
for _ in range(3):
    loss = F.mse_loss(enc(torch.randn(4, 5)), torch.zeros(4, 3)) + extra.pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
""",
    "adversarial_input_rebuilt_as_a_new_leaf_each_round": """
model = nn.Linear(5, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    x, y = torch.randn(4, 5), torch.randint(0, 3, (4,))
    x_adv = x.clone().requires_grad_()
    for _ in range(3):
        g, = torch.autograd.grad(F.cross_entropy(model(x_adv), y), x_adv)
        x_adv = x_adv.new_tensor(x_adv + 0.01 * g.sign(), requires_grad=True)
    loss = F.cross_entropy(model(x_adv), y)
    opt.zero_grad(); loss.backward(); opt.step()
""",
    "function_returns_none_for_input_without_grad": """
class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w
    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, None
w = torch.ones(3)
lin = nn.Linear(3, 3)
opt = torch.optim.SGD(lin.parameters(), lr=0.1)
for _ in range(2):
    loss = Scale.apply(lin(torch.randn(4, 3)), w).sum()
    opt.zero_grad(); loss.backward(); opt.step()
""",
    "function_recomputes_under_enable_grad": """
class Energy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inp, scale):
        ctx.save_for_backward(inp, scale)
        return (inp * scale).pow(2).sum()

    @staticmethod
    def backward(ctx, grad_out):
        inp, scale = ctx.saved_tensors
        with torch.enable_grad():
            scale = scale.detach().requires_grad_()
            e = (inp * scale).pow(2).sum()
        g, = torch.autograd.grad(e, [scale], grad_out)
        return None, g

net = nn.Linear(3, 3)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(2):
    loss = Energy.apply(torch.randn(2, 3), net(torch.randn(2, 3)))
    opt.zero_grad(); loss.backward(); opt.step()
""",
}


def test_a_custom_backward_that_raises_leaves_no_mode_behind(run_script):
    res = run_script((HEAD + """
class Boom(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2
    @staticmethod
    def backward(ctx, g):
        raise ValueError("boom")
import sys
from torch.overrides import _get_current_function_mode_stack as modes
lin = nn.Linear(2, 2)
before = [type(m).__name__ for m in modes()]
for _ in range(2):
    try:
        Boom.apply(lin(torch.randn(3, 2))).sum().backward()
    except ValueError:
        pass
print("modes", before == [type(m).__name__ for m in modes()], before, file=sys.stderr)
""").lstrip("\n"))
    assert res.code == 0 and "modes True ['ProvenanceMode']" in res.err, res.err


def _line(src: str, mark: str) -> int | None:
    return next((i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith(mark)),
                None)


@pytest.mark.parametrize("name", sorted(BUGS))
def test_cause_line_named_first(run_script, name):
    code, body = BUGS[name]
    src = (HEAD + body).lstrip("\n")
    res = run_script(src)
    assert res.findings, res.err
    first = res.findings[0]
    assert (first["code"], first["line"]) == (code, _line(src, "# C")), res.findings
    rel = _line(src, "# R")
    if rel is not None:
        assert rel in [r["line"] for r in first["related"]], first


@pytest.mark.parametrize("name", sorted(CRASHES))
def test_crash_names_the_line_that_made_the_input(run_script, name):
    code, body = CRASHES[name]
    src = (HEAD + body).lstrip("\n")
    res = run_script(src)
    assert res.code != 0
    first = res.findings[0]
    assert (first["code"], first["line"]) == (code, _line(src, "# C")), res.findings


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalike_silent(run_script, name):
    res = run_script((HEAD + LOOKALIKES[name]).lstrip("\n"))
    ran = [f for f in res.findings if f["source"] != "static"]  # (GT104 reads the copy)
    assert res.code == 0 and ran == [], (res.err, res.findings)


def test_nested_custom_functions_leave_no_mode_behind(run_script):
    """A user Function whose backward runs autograd.grad through another user Function: the
    inner one's hooks never pop the outer one's watch."""
    res = run_script((HEAD + """
import sys
from torch.overrides import _get_current_function_mode_stack as modes
class Inner(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 3
    @staticmethod
    def backward(ctx, g):
        return g * 3
class Outer(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clone()
    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        with torch.enable_grad():
            x = x.detach().requires_grad_()
            y = Inner.apply(x).sum()
        d, = torch.autograd.grad(y, x)
        return g * d
lin = nn.Linear(2, 2)
opt = torch.optim.SGD(lin.parameters(), lr=0.1)
before = [type(m).__name__ for m in modes()]
for _ in range(3):
    loss = Outer.apply(lin(torch.randn(3, 2))).sum()
    opt.zero_grad(); loss.backward(); opt.step()
print("modes", before == [type(m).__name__ for m in modes()], before, file=sys.stderr)
""").lstrip("\n"))
    assert res.code == 0 and "modes True ['ProvenanceMode']" in res.err, res.err
    assert [f for f in res.findings if f["source"] != "static"] == [], res.findings
