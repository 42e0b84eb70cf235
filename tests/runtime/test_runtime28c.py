"""Session-28 run-time diagnoses of silent freezing bugs, second wave (docs/triage/runtime28c.md):

- a part "frozen" by ``eval()`` alone whose parameters the optimizer holds in a group listed
  part by part: the group's ``<part>.parameters()`` line is named (NOTE [eval is no freeze]).

Buggy twins (code + line asserted), silent look-alikes, and a variant each case does not show.
"""
from __future__ import annotations

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


def _check(run_script, src, code):
    res = run_script(src)
    f = _run_finding(res)
    assert (f["code"], _run_line(f)) == (code, marked_line(src)), res.err


def _silent(run_script, src, code):
    res = run_script(src)
    assert res.code == 0, res.err
    assert [f for f in res.findings if f["source"] != "static" and f["code"] == code] == []


# -- eval() as a freeze, the optimizer's groups listed part by part ---------------------------
# twin: a depth network whose encoder is switched to eval() in the training step, while the
# optimizer lists the network holding that encoder as one of its groups
EVAL_GROUP_TWIN = HEAD + """
class Depth(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(6, 8), nn.GELU())
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        return self.head(self.encoder(x))


class Refiner(nn.Module):
    def __init__(self):
        super().__init__()
        self.depth = Depth()
        self.refine = nn.Linear(7, 1)

    def forward(self, x):
        return self.refine(torch.cat([x, self.depth(x)], 1))

    def step(self, x, y):
        self.depth.encoder.eval()
        return F.mse_loss(self(x), y)


model = Refiner()
opt = torch.optim.Adam([
    {"params": model.depth.parameters()},  # <- cause
    {"params": model.refine.parameters()},
], lr=1e-3)
model.train()
for _ in range(3):
    x, y = torch.randn(8, 6), torch.randn(8, 1)
    opt.zero_grad()
    model.step(x, y).backward()
    opt.step()
"""

# variant: the group is the eval'd part itself, with a learning rate of its own, the groups
# built in a helper, the part switched off once before the loop
EVAL_GROUP_VARIANT = HEAD + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 8))
        self.classifier = nn.Linear(8, 3)

    def forward(self, x):
        return self.classifier(self.stem(x))


def make_optimizer(net):
    groups = [dict(params=net.classifier.parameters(), lr=0.1),
              dict(params=net.stem.parameters(), lr=0.01)]  # <- cause
    return torch.optim.SGD(groups, momentum=0.9)


net = Net()
sgd = make_optimizer(net)
net.train()
net.stem.eval()
for _ in range(3):
    x, y = torch.randn(8, 5), torch.randint(0, 3, (8,))
    sgd.zero_grad()
    F.cross_entropy(net(x), y).backward()
    sgd.step()
"""

# look-alike: groups listed part by part, but only the BatchNorm layers are put in eval()
# (their statistics frozen on purpose, a common fine-tuning choice): nothing to report
EVAL_GROUP_BN = HEAD + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(5, 8), nn.BatchNorm1d(8), nn.ReLU())
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(self.backbone(x))


net = Net()
opt = torch.optim.SGD([{"params": net.backbone.parameters(), "lr": 0.01},
                       {"params": net.head.parameters()}], lr=0.1)
net.train()
for m in net.modules():
    if isinstance(m, nn.BatchNorm1d):
        m.eval()
for _ in range(3):
    x, y = torch.randn(8, 5), torch.randint(0, 3, (8,))
    opt.zero_grad()
    F.cross_entropy(net(x), y).backward()
    opt.step()
"""

# look-alike: groups listed part by part and a part in eval(), but that part runs under
# no_grad (really frozen): its parameters get no gradient, nothing to report
EVAL_GROUP_NO_GRAD = HEAD + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(5, 8), nn.Tanh())
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        with torch.no_grad():
            feats = self.backbone(x)
        return self.head(feats)


net = Net()
opt = torch.optim.SGD([{"params": net.backbone.parameters(), "lr": 0.01},
                       {"params": net.head.parameters()}], lr=0.1)
net.train()
net.backbone.eval()
for _ in range(3):
    x, y = torch.randn(8, 5), torch.randint(0, 3, (8,))
    opt.zero_grad()
    F.cross_entropy(net(x), y).backward()
    opt.step()
"""

# look-alike of the line: one group over the whole model (GPT-SoVITS' shape): the call that
# runs the eval'd part is named, as before
EVAL_ONE_GROUP = HEAD + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(5, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        with torch.no_grad():
            self.proj.eval()
        return self.head(torch.relu(self.proj(x)))  # <- cause


net = Net()
opt = torch.optim.AdamW([p for p in net.parameters() if p.requires_grad], lr=1e-3)
for _ in range(3):
    x, y = torch.randn(8, 5), torch.randint(0, 3, (8,))
    opt.zero_grad()
    F.cross_entropy(net(x), y).backward()
    opt.step()
"""


def test_eval_freeze_names_the_listed_group(run_script):
    _check(run_script, EVAL_GROUP_TWIN, "GT846")


def test_eval_freeze_variant_group_built_in_a_helper(run_script):
    _check(run_script, EVAL_GROUP_VARIANT, "GT846")


def test_eval_freeze_listed_groups_batchnorm_part_is_silent(run_script):
    _silent(run_script, EVAL_GROUP_BN, "GT846")


def test_eval_freeze_listed_groups_part_under_no_grad_is_silent(run_script):
    _silent(run_script, EVAL_GROUP_NO_GRAD, "GT846")


def test_eval_freeze_one_group_still_names_the_call(run_script):
    _check(run_script, EVAL_ONE_GROUP, "GT846")
