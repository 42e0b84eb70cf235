"""Session-27 run-time diagnoses of silent bugs (docs/triage/runtime27a.md):

- a view of a Parameter taken under ``no_grad`` (``w[:, 0]`` clamped in a constraint) has that
  Parameter upstream, so the no-grad cut leads over the program's ``detach().clone()`` snapshot;
- a grad-off decorated function handed a trainable leaf is named at its decorator
  (NOTE [trainable leaf handed to a grad-off function]);
- ``cross_entropy`` fed rows of probabilities (every entry in [0, 1], each row summing to 1)
  made without a ``Softmax`` node at the loss (a softmax mixed by a product);
- a module collection removed from one group while one of its modules is listed in another is a
  group split, not a freeze (NOTE [removed to be grouped]); the group taking the filtered rest
  is named.

Buggy twins (code + line asserted), silent look-alikes, and a variant each case does not show.
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


def _run_finding(res):
    found = [f for f in res.findings if f["source"] != "static"]
    assert found, res.err
    return found[0]


def _run_line(f):
    """The line the run itself named (fused: its "confirmed at run time" entry)."""
    return next((r["line"] for r in f["related"] if r["message"].startswith("confirmed at run")),
                f["line"])


def _silent(res, codes=None):
    assert res.code == 0, res.err
    run = [f for f in res.findings if f["source"] != "static"]
    if codes is not None:
        run = [f for f in run if f["code"] in codes]
    assert run == [], res.err


def _check(run_script, src, code):
    res = run_script(src)
    f = _run_finding(res)
    assert (f["code"], _run_line(f)) == (code, marked_line(src)), res.err


# -- a view of a Parameter under no_grad -----------------------------------------------------
VIEW_BUGS = {
    # LEAF's Gabor constraint: the kernel's columns clamped under no_grad, a snapshot beside
    "clamped_columns": """
class Constraint(nn.Module):
    def forward(self, k):
        with torch.no_grad():  # <- cause
            return torch.stack([k[:, 0].clamp(0, 3), k[:, 1].clamp(1, 5)], 1)

class Filters(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernel = nn.Parameter(torch.rand(4, 2) + 1)
        self.constraint = Constraint()
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        k = self.constraint(self.kernel)
        return self.head(x * k.flatten())

net = Filters()
k0 = net.kernel.detach().clone()
opt = torch.optim.Adam(net.parameters(), lr=0.01)
for _ in range(3):
    loss = net(torch.randn(5, 8)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print((net.kernel - k0).abs().max().item())
""",
    # variant: the weight's columns unbound under no_grad, restacked and renormalized
    "unbound_columns": """
class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(6, 4) * 0.1)
        self.out = nn.Linear(6, 1)

    def forward(self, x):
        with torch.no_grad():  # <- cause
            w_hat = torch.stack(self.w.unbind(1), 1).renorm(2, 0, 1.0)
        return self.out(x @ w_hat.t())

net = Tied()
snap = [p.detach().clone() for p in net.parameters()]
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    loss = net(torch.randn(5, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
}
VIEW_LOOKALIKES = {
    # the clamped copy is only logged; the parameter itself is used with grad on
    "clamped_copy_logged": """
class Filters(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernel = nn.Parameter(torch.rand(4, 2) + 1)
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        with torch.no_grad():
            self.shown = self.kernel[:, 0].clamp(0, 3).mean().item()
        return self.head(x * self.kernel.flatten())

net = Filters()
k0 = net.kernel.detach().clone()
opt = torch.optim.Adam(net.parameters(), lr=0.01)
for _ in range(3):
    loss = net(torch.randn(5, 8)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(VIEW_BUGS))
def test_view_of_a_parameter_under_no_grad_names_the_block(run_script, name):
    _check(run_script, HEAD + VIEW_BUGS[name], "GT201")


@pytest.mark.parametrize("name", sorted(VIEW_LOOKALIKES))
def test_view_under_no_grad_used_for_logging_is_silent(run_script, name):
    _silent(run_script(HEAD + VIEW_LOOKALIKES[name]))


# -- a trainable leaf handed to a grad-off function -------------------------------------------
HANDED_BUGS = {
    # DeepFloyd-IF: encode_prompt is decorated, prompt_embeds is being optimized
    "decorated_encoder": """
class Pipe:
    def __init__(self, unet):
        self.unet = unet

    @torch.no_grad()  # <- cause
    def encode_prompt(self, prompt_embeds, n=1):
        return prompt_embeds.repeat(1, n, 1)

unet = nn.Linear(16, 3)
pipe = Pipe(unet)
prompt_embeds = nn.Parameter(torch.randn(1, 4, 16) * 0.1)
opt = torch.optim.AdamW([prompt_embeds, *unet.parameters()], lr=1e-2)
for _ in range(3):
    embeds = pipe.encode_prompt(prompt_embeds)
    loss = pipe.unet(embeds).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    # variant: a learned offset normalized by a decorated plain function, the model trains too
    "decorated_helper_on_offset": """
net = nn.Linear(6, 1)
delta = torch.zeros(6, requires_grad=True)

@torch.no_grad()  # <- cause
def project(v):
    return v / max(1.0, float(v.norm()))

opt = torch.optim.Adam([delta, *net.parameters()], lr=0.1)
for _ in range(3):
    loss = net(torch.randn(8, 6) + project(delta)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
}
HANDED_LOOKALIKES = {
    # the decorated function gets plain data, the trained model is called outside it
    "decorated_preprocess": """
@torch.no_grad()
def preprocess(x):
    return (x - x.mean()) / (x.std() + 1e-6)

net = nn.Linear(6, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    loss = net(preprocess(torch.randn(8, 6))).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(HANDED_BUGS))
def test_handed_leaf_names_the_decorator(run_script, name):
    _check(run_script, HEAD + HANDED_BUGS[name], "GT201")


@pytest.mark.parametrize("name", sorted(HANDED_LOOKALIKES))
def test_decorated_function_on_plain_data_is_silent(run_script, name):
    _silent(run_script(HEAD + HANDED_LOOKALIKES[name]))


# -- cross_entropy fed probabilities, read by value -------------------------------------------
PROBS_BUGS = {
    # MatchingNetworks: attention (a softmax) times one-hot support labels
    "attention_mixture": """
class Classify(nn.Module):
    def forward(self, sims, support_y):
        return F.softmax(sims, dim=1).unsqueeze(1).bmm(support_y).squeeze(1)

enc = nn.Linear(6, 8)
cls = Classify()
opt = torch.optim.Adam(enc.parameters(), lr=1e-3)
support_y = F.one_hot(torch.arange(5).repeat(4, 1), 5).float()
for _ in range(3):
    q, s = enc(torch.randn(4, 6)), enc(torch.randn(4, 5, 6))
    preds = cls((s @ q.unsqueeze(2)).squeeze(2), support_y)
    loss = F.cross_entropy(preds, torch.randint(0, 5, (4,)))  # <- cause
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    # variant: probabilities normalized by hand (exp / sum), fed to nn.CrossEntropyLoss
    "normalized_by_hand": """
net = nn.Linear(6, 3)
crit = nn.CrossEntropyLoss()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    e = net(torch.randn(8, 6)).exp()
    p = e / e.sum(1, keepdim=True)
    loss = crit(p, torch.randint(0, 3, (8,)))  # <- cause
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
}
PROBS_LOOKALIKES = {
    # raw scores, and probabilities given as the *target* (soft labels)
    "soft_targets": """
net = nn.Linear(6, 3)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    x = torch.randn(8, 6)
    soft = torch.softmax(torch.randn(8, 3), 1)
    loss = F.cross_entropy(net(x), soft)
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    # log-probabilities into cross_entropy (harmless: log_softmax keeps them)
    "log_probabilities": """
net = nn.Linear(6, 3)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    logp = torch.log_softmax(net(torch.randn(8, 6)), 1)
    loss = F.cross_entropy(logp, torch.randint(0, 3, (8,)))
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(PROBS_BUGS))
def test_probabilities_into_cross_entropy_are_named(run_script, name):
    _check(run_script, HEAD + PROBS_BUGS[name], "GT758")


@pytest.mark.parametrize("name", sorted(PROBS_LOOKALIKES))
def test_scores_into_cross_entropy_are_silent(run_script, name):
    _silent(run_script(HEAD + PROBS_LOOKALIKES[name]))


# -- a collection removed to be grouped --------------------------------------------------------
SPLIT_BUGS = {
    # HHL: base, feat and head removed from "new", only base given its own group
    "forgotten_layers": """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.base = nn.Linear(6, 8)
        self.feat = nn.Linear(8, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(torch.relu(self.feat(torch.relu(self.base(x)))))

model = Net()
base_ids = set(map(id, model.base.parameters())) | set(map(id, model.feat.parameters()))
new_params = [p for p in model.parameters() if id(p) not in base_ids]
groups = [
    {'params': model.base.parameters(), 'lr_mult': 0.1},
    {'params': new_params, 'lr_mult': 1.0}]  # <- cause
opt = torch.optim.SGD(groups, lr=0.1)
for _ in range(3):
    loss = model(torch.randn(4, 6)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    # variant: the rest taken with filter(), three groups
    "filter_rest": """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(6, 8)
        self.mid = nn.Linear(8, 8)
        self.tail = nn.Linear(8, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(torch.relu(self.tail(torch.relu(self.mid(torch.relu(self.stem(x)))))))

model = Net()
ignored = set(map(id, model.stem.parameters())) | set(map(id, model.mid.parameters())) \\
    | set(map(id, model.tail.parameters()))
rest = filter(lambda p: id(p) not in ignored, model.parameters())
groups = [
    {'params': model.stem.parameters(), 'lr': 0.01},
    {'params': model.mid.parameters(), 'lr': 0.02},
    {'params': rest}]  # <- cause
opt = torch.optim.SGD(groups, lr=0.1)
for _ in range(3):
    loss = model(torch.randn(4, 6)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
}
SPLIT_LOOKALIKES = {
    # every removed layer gets its own group
    "every_layer_grouped": """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.base = nn.Linear(6, 8)
        self.feat = nn.Linear(8, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(torch.relu(self.feat(torch.relu(self.base(x)))))

model = Net()
base_ids = set(map(id, model.base.parameters())) | set(map(id, model.feat.parameters()))
new_params = [p for p in model.parameters() if id(p) not in base_ids]
groups = [
    {'params': model.base.parameters(), 'lr_mult': 0.1},
    {'params': model.feat.parameters(), 'lr_mult': 0.1},
    {'params': new_params, 'lr_mult': 1.0}]
opt = torch.optim.SGD(groups, lr=0.1)
for _ in range(3):
    loss = model(torch.randn(4, 6)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    # a module removed on purpose (frozen by omission), nothing of it listed elsewhere
    "frozen_by_omission": """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(6, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(torch.relu(self.encoder(x)))

model = Net()
frozen = set(map(id, model.encoder.parameters()))
opt = torch.optim.SGD([p for p in model.parameters() if id(p) not in frozen], lr=0.1)
for _ in range(3):
    loss = model(torch.randn(4, 6)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(SPLIT_BUGS))
def test_layers_removed_for_a_group_split_are_named(run_script, name):
    _check(run_script, HEAD + SPLIT_BUGS[name], "GT821")


@pytest.mark.parametrize("name", sorted(SPLIT_LOOKALIKES))
def test_complete_split_or_deliberate_omission_is_silent(run_script, name):
    _silent(run_script(HEAD + SPLIT_LOOKALIKES[name]), codes={"GT821"})
