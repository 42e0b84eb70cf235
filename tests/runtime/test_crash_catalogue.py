"""Errors torch raises from its own checks (issue 13 §2, held-out batch 5: the run said nothing):
`gradtrace run` leads with the line the user changes. Each mechanism in a spelling of its own,
from a public report other than the real-world case that motivated it, with a correct
look-alike that runs silent. Real torch, in-process `gradtrace run`.

- in-place write to a view autograd cannot rewrite: `split` outputs (OpenNMT-py#2303), a view
  made under no_grad (weight surgery), a custom Function's output, `detach_()` of a `chunk`
  view (pytorch#58285): the write;
- `register_hook`/`retain_grad` on a tensor without grad, in a CAM forward hook run under
  no_grad (torch-cam#217) or on a frozen embedding's output (sagemaker-debugger#184): the call;
- `autograd.grad` over an input made under no_grad (thermostat#5): the `with` line;
- anomaly mode's "returned nan values" from a pairwise distance of equal points, with other
  nodes of the same type in the graph (pytorch#51196 family): the forward line;
- GradScaler: a `continue` that skips `update()` (espnet#2362 in another spelling);
- an optimizer given modules or one tensor (FlowIE#11, geotorch#7), a parametrized module's
  weight (not a Parameter): the optimizer's line.
"""
from __future__ import annotations

import pytest

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F
"""

# name -> (code, body); the cause line ends with `# C`
BUGS = {
    "split_heads_scaled_in_place": ("GT832", """
proj = nn.Linear(8, 16)
x = torch.randn(2, 5, 8)
q, k = proj(x).split(8, dim=-1)
q *= 8 ** -0.5  # C
attn = torch.softmax(q @ k.transpose(-1, -2), -1)
attn.sum().backward()
"""),
    "rows_of_no_grad_slice_copied_outside": ("GT832", """
emb = nn.Embedding(10, 4)
scaled = emb.weight * 1.0
with torch.no_grad():
    special = scaled[:2]
special.copy_(torch.zeros(2, 4))  # C
"""),
    "grad_reverse_output_clamped_in_place": ("GT832", """
class GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return -g

feat = nn.Linear(4, 4)(torch.randn(3, 4))
rev = GradReverse.apply(feat)
rev.clamp_(-1, 1)  # C
rev.sum().backward()
"""),
    "lstm_state_chunk_detached_in_place": ("GT832", """
cell = nn.LSTMCell(3, 4)
state = torch.cat(cell(torch.randn(2, 3)), dim=0)
h, c = state.chunk(2)
h.detach_()  # C
"""),
    "cam_hook_in_forward_hook_under_no_grad": ("GT833", """
net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
store = {}

def keep_grad(module, inputs, output):
    store["handle"] = output.register_hook(lambda g: store.update(grad=g))  # C

net[0].register_forward_hook(keep_grad)
net.eval()
with torch.no_grad():
    scores = net(torch.rand(1, 3, 8, 8))
"""),
    "retain_grad_on_frozen_embedding_output": ("GT833", """
emb = nn.Embedding(20, 4)
emb.weight.requires_grad_(False)
head = nn.Linear(4, 2)
vec = emb(torch.tensor([[1, 2, 3]]))
vec.retain_grad()  # C
head(vec).sum().backward()
"""),
    "input_grad_of_embeddings_made_under_no_grad": ("GT702", """
embed = nn.Embedding(30, 6)
clf = nn.Sequential(nn.Linear(6, 3))
ids = torch.tensor([[3, 4, 5]])
with torch.no_grad():  # C
    inputs_embeds = embed(ids)
logits = clf(inputs_embeds).sum(1) + clf[0].bias.sum()
grads = torch.autograd.grad(logits[:, 0].sum(), inputs_embeds)
"""),
    "triplet_distance_of_equal_points_under_anomaly": ("GT825", """
torch.autograd.set_detect_anomaly(True)
enc = nn.Linear(4, 4)
anchor = torch.ones(3, 4)
za, zp = enc(anchor), enc(anchor.clone())
reg = (za ** 2).mean()
dist = torch.sqrt(((za - zp) ** 2).sum(-1))  # C
(dist.mean() + reg).backward()
"""),
    "scaler_update_skipped_by_continue": ("GT834", """
model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu")
batches = [torch.full((2, 3), float("inf")), torch.randn(2, 3)]
for xb in batches:
    opt.zero_grad()
    scaler.scale(model(xb).mean()).backward()
    scaler.unscale_(opt)
    norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    if not torch.isfinite(norm):
        continue  # C
    scaler.step(opt)
    scaler.update()
"""),
    "optimizer_given_two_submodules": ("GT835", """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(4, 4)
        self.head = nn.Linear(4, 1)

net = Net()
opt = torch.optim.AdamW([net.encoder, net.head], lr=1e-3)  # C
"""),
    "optimizer_given_bare_tensor": ("GT835", """
w = torch.zeros(3, requires_grad=True)
opt = torch.optim.Adam(w, lr=0.1)  # C
"""),
    "optimizer_given_parametrized_weight": ("GT306", """
from torch.nn.utils import parametrize

class Symmetric(nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).transpose(-1, -2)

layer = nn.Linear(3, 3)
parametrize.register_parametrization(layer, "weight", Symmetric())
opt = torch.optim.SGD([layer.weight, layer.bias], lr=0.1)  # C
"""),
    # parameter groups (differentiable-mpc#5 in other spellings): the non-leaf is named where
    # the op made it, through the group's 'params' (one tensor, or a list)
    "group_params_scaled_after_requires_grad": ("GT306", """
class Fit:
    def __init__(self):
        self.theta = torch.ones(3).requires_grad_() * 1.5  # C

    def optimizer(self):
        return torch.optim.RMSprop([{"params": self.theta, "lr": 1e-2}])

opt = Fit().optimizer()
"""),
    "second_group_cast_after_requires_grad": ("GT306", """
scale = torch.ones(4, requires_grad=True)
shift = torch.zeros(4, requires_grad=True).double()  # C
groups = [{"params": [scale]}, {"params": [shift], "lr": 0.01}]
opt = torch.optim.SGD(groups, lr=0.1)
"""),
}

LOOKALIKES = {
    "split_heads_scaled_out_of_place": """
proj = nn.Linear(8, 16)
opt = torch.optim.SGD(proj.parameters(), lr=0.1)
for _ in range(2):
    opt.zero_grad()
    q, k = proj(torch.randn(2, 5, 8)).split(8, dim=-1)
    q = q * 8 ** -0.5
    torch.softmax(q @ k.transpose(-1, -2), -1)[..., 0].sum().backward()
    opt.step()
""",
    "rows_copied_inside_no_grad": """
emb = nn.Embedding(10, 4)
with torch.no_grad():
    special = emb.weight[:2]
    special.copy_(torch.zeros(2, 4))
opt = torch.optim.SGD(emb.parameters(), lr=0.1)
for _ in range(2):
    opt.zero_grad()
    emb(torch.tensor([1, 5])).pow(2).sum().backward()
    opt.step()
""",
    "grad_reverse_output_clamped_out_of_place": """
class GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return -g

lin = nn.Linear(4, 4)
opt = torch.optim.SGD(lin.parameters(), lr=0.1)
for _ in range(2):
    opt.zero_grad()
    rev = GradReverse.apply(lin(torch.randn(3, 4)))
    rev = rev.clamp(-1, 1)
    rev.sum().backward()
    opt.step()
""",
    "lstm_state_detached_out_of_place": """
cell = nn.LSTMCell(3, 4)
opt = torch.optim.SGD(cell.parameters(), lr=0.1)
h = c = torch.zeros(2, 4)
for _ in range(2):
    opt.zero_grad()
    h, c = cell(torch.randn(2, 3), (h, c))
    h.pow(2).mean().backward()
    opt.step()
    h, c = h.detach(), c.detach()
""",
    "cam_hook_guarded_by_requires_grad": """
net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
store = {}

def keep_grad(module, inputs, output):
    if output.requires_grad:
        store["handle"] = output.register_hook(lambda g: store.update(grad=g))

net[0].register_forward_hook(keep_grad)
net.eval()
with torch.no_grad():
    scores = net(torch.rand(1, 3, 8, 8))
net(torch.rand(1, 3, 8, 8)).sum().backward()
""",
    "input_grad_of_embeddings_made_a_leaf": """
embed = nn.Embedding(30, 6)
clf = nn.Sequential(nn.Linear(6, 3))
ids = torch.tensor([[3, 4, 5]])
with torch.no_grad():
    inputs_embeds = embed(ids)
inputs_embeds.requires_grad_(True)
logits = clf(inputs_embeds).sum(1)
grads = torch.autograd.grad(logits[:, 0].sum(), inputs_embeds)
""",
    "triplet_distance_with_eps_under_anomaly": """
torch.autograd.set_detect_anomaly(True)
enc = nn.Linear(4, 4)
opt = torch.optim.SGD(enc.parameters(), lr=0.1)
anchor = torch.ones(3, 4)
for _ in range(2):
    opt.zero_grad()
    za, zp = enc(anchor), enc(anchor.clone())
    dist = torch.sqrt(((za - zp) ** 2).sum(-1) + 1e-12)
    (dist.mean() + (za ** 2).mean()).backward()
    opt.step()
torch.autograd.set_detect_anomaly(False)
""",
    "scaler_update_every_iteration": """
model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu")
batches = [torch.randn(2, 3), torch.randn(2, 3), torch.randn(2, 3)]
for xb in batches:
    opt.zero_grad()
    scaler.scale(model(xb).mean()).backward()
    scaler.unscale_(opt)
    norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    if torch.isfinite(norm):
        scaler.step(opt)
    scaler.update()
""",
    "optimizer_given_chained_parameters": """
import itertools

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(4, 4)
        self.head = nn.Linear(4, 1)

net = Net()
opt = torch.optim.AdamW(itertools.chain(net.encoder.parameters(), net.head.parameters()),
                        lr=1e-3)
for _ in range(2):
    opt.zero_grad()
    net.head(net.encoder(torch.randn(2, 4))).pow(2).mean().backward()
    opt.step()
""",
    "group_params_scaled_then_marked": """
theta = (torch.ones(3) * 1.5).requires_grad_()
shift = torch.zeros(4, dtype=torch.float64, requires_grad=True)
opt = torch.optim.RMSprop([{"params": theta, "lr": 1e-2}, {"params": [shift]}])
for _ in range(2):
    opt.zero_grad()
    ((theta - 2) ** 2).sum().add(shift.pow(2).sum().float()).backward()
    opt.step()
""",
    "optimizer_given_parametrized_module_parameters": """
from torch.nn.utils import parametrize

class Symmetric(nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).transpose(-1, -2)

layer = nn.Linear(3, 3)
parametrize.register_parametrization(layer, "weight", Symmetric())
opt = torch.optim.SGD(layer.parameters(), lr=0.1)
for _ in range(2):
    opt.zero_grad()
    layer(torch.randn(4, 3)).pow(2).mean().backward()
    opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_crash_names_the_line_to_change(run_script, name):
    code, body = BUGS[name]
    src = (HEAD + body).lstrip("\n")
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))
    res = run_script(src)
    assert res.code == 1, res.err
    assert res.findings, res.err
    first = res.findings[0]
    assert (first["code"], first["line"]) == (code, line), (first, res.err)
    assert "gradtrace: diagnosis" in res.err


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalike_trains_silent(run_script, name):
    res = run_script((HEAD + LOOKALIKES[name]).lstrip("\n"))
    assert res.code == 0 and res.findings == [], (res.findings, res.err)
