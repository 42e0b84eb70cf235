"""Session-28 run-time diagnoses of silent freezing bugs, second wave (docs/triage/runtime28c.md):

- a part "frozen" by ``eval()`` alone whose parameters the optimizer holds in a group listed
  part by part: the group's ``<part>.parameters()`` line is named (NOTE [eval is no freeze]);
- an optimizer that holds part of the model while the rest still requires grad: the rest's
  ``.grad`` sums over every backward() and a later optimizer applies the sum at its first step;
  the first optimizer's construction is named (NOTE [gradients summed outside the optimizer]).

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


# -- gradients summed outside the optimizer, applied by a later one ---------------------------
# twin: a head trained alone (the body not frozen), then the whole model fine-tuned
SUMMED_TWIN = HEAD + """
body = nn.Sequential(nn.Linear(6, 16), nn.ReLU())
head = nn.Linear(16, 2)
model = nn.Sequential(body, head)
data = [(torch.randn(8, 6), torch.randint(0, 2, (8,))) for _ in range(6)]
opt = torch.optim.SGD(head.parameters(), lr=0.1)  # <- cause
for x, y in data:
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in data[:2]:
    F.cross_entropy(model(x), y).backward()
    opt.step()
    opt.zero_grad()
"""

# variant: the partial optimizer lives in a trainer object (an encoder-only warm-up, Adam),
# the fine-tuning optimizer is built in another method; the first one is still alive
SUMMED_VARIANT = HEAD + """
class Trainer:
    def __init__(self, model):
        self.model = model
        self.warm = torch.optim.Adam(model.encoder.parameters(), lr=1e-3)  # <- cause

    def warmup(self, batches):
        for x, y in batches:
            self.warm.zero_grad()
            F.mse_loss(self.model(x), y).backward()
            self.warm.step()

    def finetune(self, batches):
        full = torch.optim.Adam(self.model.parameters(), lr=1e-4)
        for x, y in batches:
            F.mse_loss(self.model(x), y).backward()
            full.step()
            full.zero_grad()


class AE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(5, 3)
        self.decoder = nn.Linear(3, 5)

    def forward(self, x):
        return self.decoder(self.encoder(x))


batches = [(torch.randn(4, 5), torch.randn(4, 5)) for _ in range(4)]
trainer = Trainer(AE())
trainer.warmup(batches)
trainer.finetune(batches)
"""

# look-alike: the fine-tuning loop clears the gradients before its first backward()
SUMMED_CLEARED = SUMMED_TWIN.replace("""for x, y in data[:2]:
    F.cross_entropy""", """for x, y in data[:2]:
    opt.zero_grad()
    F.cross_entropy""").replace("  # <- cause", "")

# look-alike: the same, cleared with zero_grad(set_to_none=False) (zeros written in place)
SUMMED_ZEROED = SUMMED_TWIN.replace("""for x, y in data[:2]:
    F.cross_entropy""", """for x, y in data[:2]:
    opt.zero_grad(set_to_none=False)
    F.cross_entropy""").replace("  # <- cause", "")

# look-alike: the body is frozen while the head trains alone, unfrozen for fine-tuning
SUMMED_FROZEN = SUMMED_TWIN.replace("""opt = torch.optim.SGD(head.parameters(), lr=0.1)""",
                                    """body.requires_grad_(False)
opt = torch.optim.SGD(head.parameters(), lr=0.1)""").replace(
    """opt = torch.optim.SGD(model.parameters(), lr=0.01)""",
    """body.requires_grad_(True)
opt = torch.optim.SGD(model.parameters(), lr=0.01)""").replace("  # <- cause", "")

# look-alike: gradient accumulation on purpose (one optimizer, a step every 3 batches) next
# to a second optimizer that trains another model
SUMMED_ACCUMULATION = HEAD + """
net, critic = nn.Linear(4, 2), nn.Linear(4, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
copt = torch.optim.SGD(critic.parameters(), lr=0.1)
for i in range(9):
    x = torch.randn(8, 4)
    copt.zero_grad()
    critic(x).pow(2).mean().backward()
    copt.step()
    (net(x).pow(2).mean() / 3).backward()
    if i % 3 == 2:
        opt.step()
        opt.zero_grad()
"""


def test_summed_outside_the_optimizer_then_applied(run_script):
    _check(run_script, SUMMED_TWIN, "GT501")


def test_summed_outside_the_optimizer_variant_trainer_methods(run_script):
    _check(run_script, SUMMED_VARIANT, "GT501")


def test_summed_then_cleared_is_silent(run_script):
    _silent(run_script, SUMMED_CLEARED, "GT501")


def test_summed_then_zeroed_in_place_is_silent(run_script):
    _silent(run_script, SUMMED_ZEROED, "GT501")


def test_rest_frozen_while_head_trains_is_silent(run_script):
    _silent(run_script, SUMMED_FROZEN, "GT501")


def test_accumulation_on_purpose_beside_another_optimizer_is_silent(run_script):
    _silent(run_script, SUMMED_ACCUMULATION, "GT501")
