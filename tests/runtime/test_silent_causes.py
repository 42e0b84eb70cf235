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
    "nan_born_in_acos_backward": ("GT825", """
net = nn.Linear(3, 3, bias=False)
with torch.no_grad():
    net.weight.copy_(torch.eye(3))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x = torch.eye(3)[:2]
for _ in range(2):
    opt.zero_grad()
    cos = F.cosine_similarity(net(x), x, dim=1).clamp(-1, 1)
    angle = torch.acos(cos)  # C
    angle.mean().backward()
    opt.step()
"""),
    "nan_born_in_sqrt_inside_helper_no_optimizer": ("GT825", """
def length(v):
    return torch.sqrt((v ** 2).sum(-1))  # C

pts = torch.tensor([[0.0, 0.0], [0.0, 0.0], [1.0, 1.0]], requires_grad=True)
length(pts[1:] - pts[:-1]).sum().backward()
"""),
    "adam_rebuilt_on_self_every_call": ("GT829", """
class Trainer:
    def __init__(self, model):
        self.model = model

    def fit(self, x, y):
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)  # C
        for _ in range(2):
            self.opt.zero_grad()
            F.mse_loss(self.model(x), y).backward()
            self.opt.step()

t = Trainer(nn.Linear(4, 1))
for epoch in range(3):
    t.fit(torch.randn(8, 4), torch.randn(8, 1))
"""),
    "loss_module_head_left_out_of_optimizer": ("GT821", """
class ArcLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.classifier = nn.Linear(8, 3)

    def forward(self, emb, y):
        return F.cross_entropy(self.classifier(emb), y)

model, criterion = nn.Linear(4, 8), ArcLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)  # C
for _ in range(3):
    loss = criterion(model(torch.randn(8, 4)), torch.randint(0, 3, (8,)))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""),
}

LOOKALIKES = {
    "new_model_and_optimizer_per_fold": """
for fold in range(3):
    model = nn.Linear(4, 1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(2):
        opt.zero_grad()
        F.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1)).backward()
        opt.step()
""",
    "stateless_sgd_rebuilt_every_epoch": """
model = nn.Linear(4, 1)
for epoch in range(3):
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    opt.zero_grad()
    F.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1)).backward()
    opt.step()
""",
    "optimizer_rebuilt_once_for_a_second_stage": """
model = nn.Linear(4, 1)
for stage_lr in (1e-3, 1e-4):
    opt = torch.optim.Adam(model.parameters(), lr=stage_lr)
    for _ in range(2):
        opt.zero_grad()
        F.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1)).backward()
        opt.step()
""",
    "sqrt_with_eps_stays_finite": """
def length(v):
    return torch.sqrt((v ** 2).sum(-1) + 1e-12)

pts = torch.tensor([[0.0, 0.0], [0.0, 0.0], [1.0, 1.0]], requires_grad=True)
length(pts[1:] - pts[:-1]).sum().backward()
""",
    "nan_in_forward_of_unused_branch_without_grad": """
x = torch.tensor([0.0, 1.0], requires_grad=True)
stats = torch.sqrt(x.detach() - 0.5)
(x * 2).sum().backward()
""",
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


def test_class_file_survives_a_main_module_that_is_gone(tmp_path):
    """A class defined by a script run as __main__ that already returned: its file is still
    known (from its methods' code), so `replaced_at` can read the source."""
    from gradtrace.runtime.trace.wiring import _class_file

    path = tmp_path / "gone.py"
    path.write_text("class Net:\n    def forward(self):\n        return 1\n")
    ns: dict = {"__name__": "gradtrace_gone_module"}
    exec(compile(path.read_text(), str(path), "exec"), ns)
    assert _class_file(ns["Net"]) == str(path)
