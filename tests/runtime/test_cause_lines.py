"""`gradtrace run` names the cause's line, not the symptom's (issue 13 §2); real torch, tiny
models. Each bug has a look-alike that stays silent."""
from __future__ import annotations

import pytest

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F
"""

# name -> (code, body); the cause line carries `# C`
BUGS = {
    "no_grad_in_select_action": ("GT201", """
class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 16), nn.Linear(16, 2)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))

    def select_action(self, state):
        with torch.no_grad():  # C
            return F.softmax(self(state), dim=-1)

policy = Policy()
probs = policy.select_action(torch.randn(5, 4))
(-torch.log(probs[:, 0]).mean()).backward()
"""),
    "everything_frozen": ("GT809", """
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
for p in model.parameters():
    p.requires_grad = False  # C
opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
"""),
    "model_rebuilt_after_optimizer": ("GT404", """
def build():
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
model = build()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model = build()  # C
for _ in range(3):
    opt.zero_grad()
    model(torch.randn(8, 4)).pow(2).mean().backward()
    opt.step()
"""),
    "requires_grad_attribute_on_submodule": ("GT407", """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone, self.head = nn.Linear(4, 8), nn.Linear(8, 1)

    def forward(self, x):
        return self.head(torch.relu(self.backbone(x)))

def freeze(net):
    net.backbone.requires_grad = False  # C

model = Net()
freeze(model)
opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
for _ in range(3):
    opt.zero_grad()
    model(torch.randn(8, 4)).pow(2).mean().backward()
    opt.step()
"""),
    "where_with_nan_branch": ("GT825", """
x = torch.tensor([-1.0, 0.5, 2.0], requires_grad=True)
opt = torch.optim.SGD([x], lr=0.1)
for _ in range(2):
    opt.zero_grad()
    y = torch.where(x > 0, torch.sqrt(x), torch.zeros_like(x))  # C
    y.sum().backward()
    opt.step()
"""),
    "where_nan_without_optimizer": ("GT825", """
x = torch.tensor([0.0, 2.0, 3.0], requires_grad=True)
y = torch.where(x > 2, torch.log2(x), 2 * x)  # C
y.sum().backward()
print(x.grad)
"""),
    "gan_fake_into_discriminator": ("GT508", """
G = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
D = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))
opt_g, opt_d = torch.optim.Adam(G.parameters()), torch.optim.Adam(D.parameters())
bce = nn.BCEWithLogitsLoss()
for step in range(2):
    fake = G(torch.randn(4, 2))
    opt_d.zero_grad()
    d_fake = D(fake)  # C
    d_loss = bce(D(torch.randn(4, 2)), torch.ones(4, 1)) + bce(d_fake, torch.zeros(4, 1))
    d_loss.backward()
    opt_d.step()
    opt_g.zero_grad()
    bce(D(fake), torch.ones(4, 1)).backward()
    opt_g.step()
"""),
    "inference_mode_cache_at_module_level": ("GT204", """
with torch.inference_mode():  # C
    scale = torch.linspace(0.5, 1.5, 4)
model = nn.Linear(4, 1)
loss = (model.weight * scale).pow(2).mean()
loss.backward()
"""),
}

LOOKALIKES = {
    "frozen_with_requires_grad_": """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone, self.head = nn.Linear(4, 8), nn.Linear(8, 1)
        self.requires_grad = True  # a flag of the class, in line with its parameters

    def forward(self, x):
        return self.head(torch.relu(self.backbone(x)))

model = Net()
model.backbone.requires_grad_(False)
opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
for _ in range(3):
    opt.zero_grad()
    model(torch.randn(8, 4)).pow(2).mean().backward()
    opt.step()
""",
    "where_with_safe_branch": """
x = torch.tensor([-1.0, 0.5, 2.0], requires_grad=True)
opt = torch.optim.SGD([x], lr=0.1)
for _ in range(2):
    opt.zero_grad()
    safe = torch.where(x > 0, x, torch.ones_like(x))
    y = torch.where(x > 0, torch.sqrt(safe), torch.zeros_like(x))
    y.sum().backward()
    opt.step()
""",
    "where_with_infinite_leaf_branch": """
x = torch.tensor([1.0, 2.0], requires_grad=True)
far = torch.tensor([float("inf"), 0.0], requires_grad=True)
y = torch.where(x > 1.5, x, far)
(y * torch.tensor([0.0, 1.0])).sum().backward()
print(x.grad, far.grad)
""",
    "model_rebuilt_before_optimizer": """
def build():
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
model = build()
model = build()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    model(torch.randn(8, 4)).pow(2).mean().backward()
    opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_cause_line_named_first(run_script, name):
    code, body = BUGS[name]
    src = (HEAD + body).lstrip("\n")
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))
    res = run_script(src)
    assert res.findings, res.err
    assert (res.findings[0]["code"], res.findings[0]["line"]) == (code, line), res.err


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalike_silent(run_script, name):
    res = run_script((HEAD + LOOKALIKES[name]).lstrip("\n"))
    assert res.code == 0 and res.findings == [], res.err
