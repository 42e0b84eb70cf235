"""`gradtrace run` names the cause's line of a crash, not the line that raised (issue 13 §2):
requires_grad on integer / computed tensors, a custom Function's wrong return, a graph freed by
an earlier backward, inference tensors, backward inside an evaluation block. Real torch, tiny
models; each bug has a look-alike that stays silent."""
from __future__ import annotations

import pytest

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F
"""

# name -> (code, body); the cause line carries `# C`
BUGS = {
    "argmax_indices_require_grad": ("GT304", """
net = nn.Linear(6, 3)
scores = net(torch.randn(4, 6))
picked = scores.argmax(dim=1)
picked.requires_grad_(True)  # C
loss = picked.float().mean()
loss.backward()
"""),
    "integer_mask_wrapped_as_parameter": ("GT304", """
class Gate(nn.Module):
    def __init__(self, mask):
        super().__init__()
        self.keep = nn.Parameter(mask)  # C
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x) * self.keep

gate = Gate(torch.tensor([1, 1, 0, 1]))
"""),
    "computed_tensor_flag_set": ("GT303", """
w = torch.randn(5, requires_grad=True)
act = torch.tanh(w * 3)
act.requires_grad = True  # C
act.sum().backward()
"""),
    "loop_rebinds_leaf_to_computed": ("GT303", """
net = nn.Linear(4, 2)

def perturb(batch, rounds=3):
    delta = torch.zeros_like(batch)
    for _ in range(rounds):
        delta.requires_grad = True
        grad, = torch.autograd.grad(net(batch + delta).sum(), delta)
        delta = delta + 0.01 * grad.sign() * delta.abs().clamp(min=1.0)  # C
    return delta

perturb(torch.randn(3, 4))
"""),
    "function_returns_too_few": ("GT701", """
class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, factor, clamp):
        ctx.factor = factor
        return x * factor

    @staticmethod
    def backward(ctx, grad_out):
        if ctx.factor is None:
            return grad_out, None, None
        return grad_out * ctx.factor, None  # C

x = torch.randn(3, requires_grad=True)
Scale.apply(x, 2.0, False).sum().backward()
"""),
    "second_loss_after_first_backward": ("GT509", """
enc, h1, h2 = nn.Linear(4, 8), nn.Linear(8, 1), nn.Linear(8, 1)
feats = torch.tanh(enc(torch.randn(5, 4)))
recon = h1(feats).pow(2).mean()
aux = h2(feats).abs().mean()
recon.backward()  # C
aux.backward()
"""),
    "gan_fake_into_critic_in_helper": ("GT508", """
gen = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 4))
critic = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
opt_g = torch.optim.SGD(gen.parameters(), lr=0.01)
opt_c = torch.optim.SGD(critic.parameters(), lr=0.01)

def critic_loss(real, fake):
    return critic(fake).mean() - critic(real).mean()  # C

for it in range(2):
    sample = gen(torch.randn(6, 3))
    opt_c.zero_grad()
    critic_loss(torch.randn(6, 4), sample).backward()
    opt_c.step()
    opt_g.zero_grad()
    (-critic(sample).mean()).backward()
    opt_g.step()
"""),
    "inference_decorator_grows_embedding": ("GT204", """
body, head = nn.Linear(4, 4), nn.Linear(4, 3)

@torch.inference_mode()  # C
def grow(layer, extra):
    rows = layer.weight.mean(0, keepdim=True).expand(extra, -1)
    layer.weight = nn.Parameter(torch.cat([layer.weight, rows]))
    layer.bias = nn.Parameter(torch.cat([layer.bias, layer.bias[:extra]]))

grow(head, 2)
opt = torch.optim.SGD([*body.parameters(), *head.parameters()], lr=0.1)
head(body(torch.randn(2, 4))).pow(2).sum().backward()
"""),
    "inference_block_around_helper": ("GT204", """
enc, head = nn.Linear(4, 6), nn.Linear(6, 1)

def embed(batch):
    return torch.relu(enc(batch))

with torch.inference_mode():  # C
    cached = embed(torch.randn(8, 4))
head(cached).pow(2).mean().backward()
"""),
    "backward_in_evaluation_block": ("GT207", """
net = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1), nn.Linear(4, 1))
opt = torch.optim.SGD(net.parameters(), lr=0.1)

def validate(batch):
    net.eval()
    with torch.no_grad():
        val_loss = net(batch).pow(2).mean()
        opt.zero_grad()
        val_loss.backward()  # C
        opt.step()
    net.train()

validate(torch.randn(3, 4))
"""),
    "stale_value_reused_after_step": ("GT601", """
gen = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 3))
disc = nn.Linear(3, 1)
opt = torch.optim.SGD(gen.parameters(), lr=0.1)
fake = gen(torch.randn(2, 3))
for k in range(2):
    opt.zero_grad()
    score = disc(fake)  # C
    (-score.mean()).backward(retain_graph=True)
    opt.step()
"""),
    "grad_of_per_sample_scores": ("GT510", """
net = nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 1))

def input_saliency(batch):
    batch = batch.clone().requires_grad_(True)
    scores = net(batch)
    return torch.autograd.grad(scores, batch)[0]  # C

input_saliency(torch.randn(3, 5))
"""),
    "loss_module_keeps_per_element_values": ("GT510", """
class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 2)
        self.loss_fn = nn.MSELoss(reduction="none")  # C

    def forward(self, x, y):
        return self.loss_fn(self.body(x), y)

model = Regressor()
model(torch.randn(3, 4), torch.randn(3, 2)).backward()
"""),
    "frozen_grads_scaled_in_loop": ("GT801", """
net = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
for p in net[0].parameters():
    p.requires_grad_(False)
opt = torch.optim.SGD([p for p in net.parameters() if p.requires_grad], lr=0.1)
net(torch.randn(3, 4)).pow(2).mean().backward()
for p in net.parameters():
    p.grad.div_(4)  # C
opt.step()
"""),
    "weights_copied_as_plain_tensors": ("GT402", """
class Projector(nn.Module):
    def __init__(self, source):
        super().__init__()
        weights = source.state_dict()
        self.proj = weights["weight"].t()  # C

    def forward(self, x):
        return x @ self.proj

model = Projector(nn.Linear(4, 3))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
"""),
    "forward_builds_its_layer_after_a_call": ("GT809", """
class Head(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.n = n

    def forward(self, x):
        x = nn.Linear(self.n, 4)(x)  # C
        return torch.relu(x)

head = Head(6)
head(torch.randn(2, 6))
opt = torch.optim.SGD(head.parameters(), lr=0.1)
"""),
    "forward_builds_its_layer_never_called": ("GT809", """
from torch.nn import Linear as Dense

class Head(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.n = n

    def forward(self, x):
        return torch.relu(Dense(self.n, 4)(x))  # C

heads = {"main": Head(6)}
opt = torch.optim.SGD(heads["main"].parameters(), lr=0.1)
"""),
    "table_cached_under_inference_mode": ("GT204", """
class Scaler(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self._table, self._size = None, 0

    def _table_for(self, n):
        if self._table is None or n > self._size:  # C
            self._size = n
            self._table = torch.linspace(0.5, 1.5, n).unsqueeze(1)
        return self._table[:n]

    def forward(self, x):
        return self.lin(x) * self._table_for(x.shape[0])

model = Scaler()
with torch.inference_mode():
    model(torch.randn(3, 4))
model(torch.randn(3, 4)).pow(2).mean().backward()
"""),
}

LOOKALIKES = {
    "table_cached_under_no_grad": """
class Scaler(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self._table, self._size = None, 0

    def _table_for(self, n):
        if self._table is None or n > self._size:
            self._size = n
            self._table = torch.linspace(0.5, 1.5, n).unsqueeze(1)
        return self._table[:n]

    def forward(self, x):
        return self.lin(x) * self._table_for(x.shape[0])

model = Scaler()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
with torch.no_grad():
    model(torch.randn(3, 4))
model(torch.randn(3, 4)).pow(2).mean().backward()
opt.step()
""",
    "weights_copied_as_parameters": """
class Projector(nn.Module):
    def __init__(self, source):
        super().__init__()
        weights = source.state_dict()
        self.proj = nn.Parameter(weights["weight"].t().clone())
        self.scale = torch.ones(3)

    def forward(self, x):
        return x @ self.proj * self.scale

model = Projector(nn.Linear(4, 3))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
opt.zero_grad()
model(torch.randn(2, 4)).sum().backward()
opt.step()
""",
    "frozen_grads_skipped_in_loop": """
net = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
for p in net[0].parameters():
    p.requires_grad_(False)
opt = torch.optim.SGD([p for p in net.parameters() if p.requires_grad], lr=0.1)
net(torch.randn(3, 4)).pow(2).mean().backward()
for p in net.parameters():
    if p.grad is not None:
        p.grad.div_(4)
opt.step()
""",
    "grad_of_per_sample_scores_weighted": """
net = nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 1))

def input_saliency(batch):
    batch = batch.clone().requires_grad_(True)
    scores = net(batch)
    return torch.autograd.grad(scores, batch, grad_outputs=torch.ones_like(scores))[0]

input_saliency(torch.randn(3, 5))
""",
    "loss_module_per_element_then_mean": """
class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 2)
        self.loss_fn = nn.MSELoss(reduction="none")

    def forward(self, x, y):
        return self.loss_fn(self.body(x), y)

model = Regressor()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model(torch.randn(3, 4), torch.randn(3, 2)).mean().backward()
opt.step()
""",
    "value_recomputed_after_step": """
gen = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 3))
disc = nn.Linear(3, 1).requires_grad_(False)
opt = torch.optim.SGD(gen.parameters(), lr=0.1)
noise = torch.randn(2, 3)
for k in range(2):
    opt.zero_grad()
    fake = gen(noise)
    score = disc(fake)
    (-score.mean()).backward(retain_graph=True)
    opt.step()
""",
    "float_mask_parameter": """
class Gate(nn.Module):
    def __init__(self, mask):
        super().__init__()
        self.keep = nn.Parameter(mask.float())
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x) * self.keep

gate = Gate(torch.tensor([1, 1, 0, 1]))
gate(torch.randn(2, 4)).sum().backward()
""",
    "loop_restarts_from_detached_leaf": """
net = nn.Linear(4, 2)

def perturb(batch, rounds=3):
    delta = torch.zeros_like(batch)
    for _ in range(rounds):
        delta.requires_grad = True
        grad, = torch.autograd.grad(net(batch + delta).sum(), delta)
        delta = (delta + 0.01 * grad.sign()).detach()
    return delta

perturb(torch.randn(3, 4))
""",
    "function_returns_one_per_input": """
class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        return x * factor

    @staticmethod
    def backward(ctx, grad_out):
        return grad_out * ctx.factor, None

x = torch.randn(3, requires_grad=True)
Scale.apply(x, 2.0).sum().backward()
""",
    "first_backward_retains_graph": """
enc, h1, h2 = nn.Linear(4, 8), nn.Linear(8, 1), nn.Linear(8, 1)
feats = torch.tanh(enc(torch.randn(5, 4)))
recon = h1(feats).pow(2).mean()
aux = h2(feats).abs().mean()
recon.backward(retain_graph=True)
aux.backward()
""",
    "gan_fake_detached_for_critic": """
gen = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 4))
critic = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
opt_g = torch.optim.SGD(gen.parameters(), lr=0.01)
opt_c = torch.optim.SGD(critic.parameters(), lr=0.01)

def critic_loss(real, fake):
    return critic(fake).mean() - critic(real).mean()

for it in range(2):
    opt_g.zero_grad()
    opt_c.zero_grad()
    sample = gen(torch.randn(6, 3))
    critic_loss(torch.randn(6, 4), sample.detach()).backward()
    opt_c.step()
    opt_g.zero_grad()
    (-critic(sample).mean()).backward()
    opt_g.step()
""",
    "inference_for_evaluation_only": """
enc, head = nn.Linear(4, 6), nn.Linear(6, 1)
opt = torch.optim.SGD([*enc.parameters(), *head.parameters()], lr=0.1)

def embed(batch):
    return torch.relu(enc(batch))

with torch.inference_mode():
    score = head(embed(torch.randn(8, 4))).mean().item()
opt.zero_grad()
head(embed(torch.randn(8, 4))).pow(2).mean().backward()
opt.step()
""",
    "validation_without_backward": """
net = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1), nn.Linear(4, 1))
opt = torch.optim.SGD(net.parameters(), lr=0.1)

def validate(batch):
    net.eval()
    with torch.no_grad():
        val_loss = net(batch).pow(2).mean()
    net.train()
    return val_loss.item()

validate(torch.randn(3, 4))
opt.zero_grad()
net(torch.randn(3, 4)).pow(2).mean().backward()
opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_crash_cause_line_named_first(run_script, name):
    code, body = BUGS[name]
    src = (HEAD + body).lstrip("\n")
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))
    res = run_script(src)
    assert res.code == 1, res.err
    assert res.findings, res.err
    assert (res.findings[0]["code"], res.findings[0]["line"]) == (code, line), res.err


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_crash_lookalike_silent(run_script, name):
    res = run_script((HEAD + LOOKALIKES[name]).lstrip("\n"))
    assert res.code == 0 and res.findings == [], res.err


def test_unrelated_crash_is_not_diagnosed(run_script):
    """An autograd error the program caught earlier does not explain a later, unrelated crash;
    nor does a None that is not a .grad get a gradient explanation."""
    res = run_script((HEAD + """
net = nn.Linear(4, 2)
out = net(torch.randn(3, 4))
try:
    out.backward()
except RuntimeError:
    out.sum().backward()
settings = {"lr": 0.1, "schedule": None}
settings["schedule"].size
""").lstrip("\n"))
    assert res.code == 1
    assert "gradtrace: diagnosis" not in res.err, res.err
    assert "separate from the error above" in res.err, res.err
    # the static GT715 (a backward on a per-sample value) accounts for the caught error and
    # leads, the run's GT510 attached (`run` consults the checker for the files that ran)
    assert [f["code"] for f in res.findings] == ["GT715"], res.err
    assert "confirmed at run time (GT510)" in res.err, res.err
