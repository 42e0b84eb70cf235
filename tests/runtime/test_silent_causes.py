"""Silent bugs: `gradtrace run` names the line of the cause first (issue 13 §2), seen on the live
optimizer, parameters and hooks; real torch, tiny models. Each shape has a look-alike that stays
silent."""
from __future__ import annotations

import pytest

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F
"""

# name -> (code, body); the cause line carries `# C`
BUGS = {
    "zero_grad_missing_in_helper": ("GT501", """
def train(model, loader, opt):
    for x, y in loader:
        loss = F.mse_loss(model(x), y)
        loss.backward()  # C
        opt.step()

model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
train(model, [(torch.randn(8, 4), torch.randn(8, 1))] * 4, opt)
"""),
    "zero_grad_of_the_other_optimizer": ("GT501", """
G, D = nn.Linear(4, 4), nn.Linear(4, 1)
opt_g, opt_d = torch.optim.SGD(G.parameters(), lr=0.01), torch.optim.SGD(D.parameters(), lr=0.01)
x = torch.randn(8, 4)
for _ in range(4):
    d_loss = D(G(x).detach()).mean()
    d_loss.backward()  # C
    opt_d.step()
    opt_g.zero_grad()
    (-D(G(x)).mean()).backward()
    opt_g.step()
"""),
}

LOOKALIKES = {
    "backbone_in_eval_mode_left_out_of_optimizer": """
class Probe(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem, self.encoder, self.head = nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(8, 2)

    def forward(self, x):
        self.encoder.eval()
        return self.head(self.encoder(self.stem(x)))

model = Probe()
opt = torch.optim.AdamW(list(model.stem.parameters()) + list(model.head.parameters()))
for _ in range(3):
    opt.zero_grad()
    F.cross_entropy(model(torch.randn(8, 4)), torch.randint(0, 2, (8,))).backward()
    opt.step()
""",
    "backbone_head_unused_when_its_layers_are_called": """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Module()
        self.backbone.body = nn.Linear(4, 8)
        self.backbone.fc = nn.Linear(8, 100)
        self.classifier = nn.Linear(8, 2)

    def forward(self, x):
        return self.classifier(self.backbone.body(x))

model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    F.cross_entropy(model(torch.randn(8, 4)), torch.randint(0, 2, (8,))).backward()
    opt.step()
""",
    "zero_grad_every_step": """
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in [(torch.randn(8, 4), torch.randn(8, 1))] * 4:
    opt.zero_grad()
    F.mse_loss(model(x), y).backward()
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
