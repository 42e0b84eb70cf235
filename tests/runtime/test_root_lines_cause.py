"""`gradtrace run` names the line the user changes, not the symptom's (issue 13 §2, held-out
batch 4): the constructor of a layer built with `inplace=True` whose call wrote into a saved
tensor (not the call); a class whose layers never became attributes (a misnamed constructor,
layers bound to locals: the static GT444 leads the empty-optimizer crash); a loss attribute
built once in `__init__` by a helper method (the static GT521 leads the in-place error of the
step). Each bug in a spelling of its own from the real-world case that motivated it, with a
look-alike that stays silent. Real torch, in-process runs."""
from __future__ import annotations

import pytest

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F
"""

# name -> (code, body, static checks on); the cause line carries `# C`
BUGS = {
    "leaky_inplace_attribute_after_sigmoid": ("GT602", """
class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = nn.LeakyReLU(0.1, inplace=True)  # C

    def forward(self, x):
        h = torch.sigmoid(self.fc(x))
        return self.act(h)

Gate()(torch.randn(2, 4)).sum().backward()
""", False),
    "inplace_relu_inside_sequential_after_tanh": ("GT602", """
head = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.ReLU(inplace=True))  # C
out = head(torch.randn(5, 3))
out.mean().backward()
""", False),
    "constructor_misspelt_double_underscore": ("GT444", """
class Scorer(nn.Module):
    def __int__(self):  # C
        super().__int__()
        self.body = nn.Linear(6, 1)

    def forward(self, x):
        return self.body(x)

net = Scorer()
opt = torch.optim.Adam(net.parameters())
""", True),
    "layers_kept_in_locals_of_init": ("GT444", """
class TwoTower(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.d = d
        user_tower = nn.Linear(d, 4)  # C
        item_tower = nn.Linear(d, 4)

    def forward(self, u, i):
        return (self.user_tower(u) * self.item_tower(i)).sum(-1)

model = TwoTower(3)
sgd = torch.optim.SGD(model.parameters(), lr=0.1)
""", True),
    "penalty_attribute_built_by_helper_in_init": ("GT521", """
class Ranker(nn.Module):
    def __init__(self):
        super().__init__()
        self.score = nn.Linear(4, 1)
        self.attach_penalty(list(self.score.parameters()), 1e-3)  # C

    def attach_penalty(self, tensors, coef):
        acc = 0.0
        for t in tensors:
            acc = acc + t.abs().sum()
        self.penalty = coef * acc

    def forward(self, x):
        return self.score(x).squeeze(-1)

model = Ranker()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    loss = F.mse_loss(model(torch.randn(3, 4)), torch.randn(3)) + model.penalty
    opt.zero_grad()
    loss.backward(retain_graph=True)
    opt.step()
""", True),
}

LOOKALIKES = {
    "inplace_relu_after_linear": """
head = nn.Sequential(nn.Linear(3, 3), nn.ReLU(inplace=True), nn.Linear(3, 1))
act = nn.LeakyReLU(0.1, inplace=True)
h = act(nn.Linear(2, 3)(torch.randn(4, 2)))
(head(torch.randn(5, 3)).mean() + h.sum()).backward()
""",
    "layers_locals_then_registered": """
class TwoTower(nn.Module):
    def __init__(self, d):
        super().__init__()
        user_tower = nn.Linear(d, 4)
        self.towers = nn.ModuleList([user_tower, nn.Linear(d, 4)])

    def forward(self, u, i):
        return (self.towers[0](u) * self.towers[1](i)).sum(-1)

model = TwoTower(3)
sgd = torch.optim.SGD(model.parameters(), lr=0.1)
loss = model(torch.randn(2, 3), torch.randn(2, 3)).sum()
sgd.zero_grad()
loss.backward()
sgd.step()
""",
    "penalty_recomputed_by_helper_each_step": """
class Ranker(nn.Module):
    def __init__(self):
        super().__init__()
        self.score = nn.Linear(4, 1)
        self.attach_penalty(list(self.score.parameters()), 1e-3)

    def attach_penalty(self, tensors, coef):
        self.tensors, self.coef = tensors, coef

    def penalty(self):
        return self.coef * sum(t.abs().sum() for t in self.tensors)

    def forward(self, x):
        return self.score(x).squeeze(-1)

model = Ranker()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    loss = F.mse_loss(model(torch.randn(3, 4)), torch.randn(3)) + model.penalty()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_cause_line_named_first(tmp_path, name):
    import runpy

    import gradtrace

    code, body, static = BUGS[name]
    src = (HEAD + body).lstrip("\n")
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))
    path = tmp_path / f"{name}.py"
    path.write_text(src, encoding="utf-8")
    tr = gradtrace.trace(static=static)
    try:
        with tr:
            runpy.run_path(str(path))
        found = tr.findings
    except Exception as exc:  # noqa: BLE001 - the crash bugs raise
        found = tr.diagnose(exc)
    assert found, tr.findings
    assert (found[0].code, found[0].line) == (code, line), found


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalike_silent(run_script, name):
    res = run_script((HEAD + LOOKALIKES[name]).lstrip("\n"))
    assert res.code == 0 and res.findings == [], res.err
