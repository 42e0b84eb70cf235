"""An evaluation run in train mode (NOTE [evaluated in train mode], GT874): a trained model
evaluated under a grad-off switch without ``eval()`` is named at the line that evaluates it
inside the switch's frame; each look-alike (a GAN's sample, a pseudo-label pass, a statistics
re-estimation, a teacher, the model put in eval mode) stays silent. Real torch, tiny models,
in-process runs; the training bits are those of a plain run."""
from __future__ import annotations

import pytest

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

def batches(n, shift=0.0):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(8, 6, generator=g) + shift, torch.randint(0, 3, (8,), generator=g))
            for _ in range(n)]

def fit(model, opt, data):
    for x, y in data:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
"""

BUGS = {
    # the same pass, but its outputs are kept: an evaluation in train mode
    "outputs_kept_under_no_grad": """
net = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
fit(net, opt, batches(3))
outs = []
with torch.no_grad():
    for x, _ in batches(4):
        outs.append(net(x))  # C
print(torch.cat(outs).argmax(1).tolist())
""",
    # a decorated evaluation function, the model called through a helper of a trainer class
    "decorated_evaluate_through_helper": """
class Trainer:
    def __init__(self, net):
        self.net = net

    def _scores(self, x):
        return self.net(x)

    @torch.no_grad()
    def evaluate(self, data):
        return [float(self._scores(x).argmax(1).eq(y).float().mean()) for x, y in data]  # C

net = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
net.train()
fit(net, opt, batches(3))
print(Trainer(net).evaluate(batches(3, shift=2.0)))
""",
    # inference_mode block inside an epoch loop, the next epoch trains again afterwards
    "inference_mode_each_epoch": """
model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(2):
    fit(model, opt, batches(2))
    total = 0.0
    with torch.inference_mode():
        for x, y in batches(2, shift=1.0):
            total += F.cross_entropy(model(x), y).item()  # C
    print(epoch, total)
""",
    # held-out 9's GACNet: the caller opens no_grad around a test() helper that loops over
    # batches: the model's call in the helper (NOTE [evaluated in train mode])
    "test_helper_inside_callers_no_grad": """
def test(model, loader):
    correct = 0
    for x, y in loader:
        pred = model(x)  # C
        correct += int(pred.argmax(1).eq(y).sum())
    return correct

model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(2):
    model.train()
    fit(model, opt, batches(2))
    with torch.no_grad():
        print(test(model, batches(2, shift=1.0)), test(model, batches(2, shift=1.0)))
""",
    # the same with a model class of its own, an inference_mode block and a method helper
    "method_helper_inside_callers_inference_mode": """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.bn, self.out = nn.Linear(6, 8), nn.BatchNorm1d(8), nn.Linear(8, 3)

    def forward(self, x):
        return self.out(torch.relu(self.bn(self.fc(x))))

class Runner:
    def __init__(self, net):
        self.net = net

    def accuracy(self, data):
        hits = [self.net(x).argmax(1).eq(y).float().mean() for x, y in data]  # C
        return float(sum(hits)) / len(hits)

net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
runner = Runner(net)
for epoch in range(2):
    fit(net, opt, batches(3))
    with torch.inference_mode():
        print(runner.accuracy(batches(3, shift=1.0)))
""",
}

LOOKALIKES = {
    # schedule-free's recipe: training batches run under no_grad in train mode only to refresh
    # the BatchNorm statistics (the outputs are dropped), then the model is put in eval mode
    "statistics_refresh_outputs_dropped": """
class Runner:
    def __init__(self, net):
        self.net = net

    def refresh(self, data):
        self.net.train()
        with torch.no_grad():
            for x, _ in data:
                self.net(x)
        self.net.eval()

net = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
fit(net, opt, batches(3))
Runner(net).refresh(batches(4))
with torch.no_grad():
    print([float(net(x).sum()) for x, _ in batches(2)])
""",
    # the evaluation puts the model in eval mode first
    "eval_before_evaluating": """
model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
fit(model, opt, batches(3))
model.eval()
with torch.no_grad():
    print([float(F.cross_entropy(model(x), y)) for x, y in batches(3)])
""",
    # a GAN generator samples under no_grad in train mode for the discriminator's step
    "gan_sample_for_discriminator": """
G = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 6))
D = nn.Sequential(nn.Linear(6, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
for step in range(4):
    real = torch.randn(8, 6)
    with torch.no_grad():
        fake = G(torch.randn(8, 4))
    loss_d = F.softplus(-D(real)).mean() + F.softplus(D(fake)).mean()
    opt_d.zero_grad()
    loss_d.backward()
    opt_d.step()
    loss_g = F.softplus(-D(G(torch.randn(8, 4)))).mean()
    opt_g.zero_grad()
    loss_g.backward()
    opt_g.step()
""",
    # pseudo-labels from the training model on a weak view, one grad-off pass per step
    "pseudo_labels_each_step": """
model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, _ in batches(4):
    with torch.no_grad():
        target = model(x + 0.01 * torch.randn_like(x)).argmax(1)
    opt.zero_grad()
    F.cross_entropy(model(x), target).backward()
    opt.step()
""",
    # statistics re-estimated on purpose after training: reset, then averaged
    "statistics_reestimated_after_reset": """
model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
fit(model, opt, batches(3))
for m in model.modules():
    if isinstance(m, nn.BatchNorm1d):
        m.reset_running_stats()
        m.momentum = None
model.train()
with torch.no_grad():
    for x, _ in batches(3):
        model(x)
""",
    # a teacher that only ever runs under no_grad (never trained here) in train mode
    "teacher_only_under_no_grad": """
teacher = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
student = nn.Sequential(nn.Linear(6, 3))
opt = torch.optim.SGD(student.parameters(), lr=0.1)
for x, _ in batches(4):
    with torch.no_grad():
        soft = teacher(x).softmax(1)
        soft2 = teacher(x * 0.5).softmax(1)
    opt.zero_grad()
    F.kl_div(student(x).log_softmax(1), (soft + soft2) / 2, reduction="batchmean").backward()
    opt.step()
""",
    # rollouts of a trained policy with grad off, then a training pass on them (a backward)
    "rollouts_then_update": """
policy = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.Tanh(), nn.Linear(8, 3))
opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
for it in range(3):
    obs = []
    with torch.no_grad():
        for t in range(3):
            o = torch.randn(4, 6)
            policy(o)
            obs.append(o)
    x = torch.cat(obs)
    loss = -policy(x).log_softmax(1)[:, 0].mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
}


def _line(src: str) -> int:
    return next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))


@pytest.mark.parametrize("name", sorted(BUGS))
def test_evaluating_line_named_first(run_script, name):
    src = (HEAD + BUGS[name]).lstrip("\n")
    res = run_script(src)
    assert res.findings, res.err
    assert (res.findings[0]["code"], res.findings[0]["line"]) == ("GT874", _line(src)), \
        res.findings


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalike_silent(run_script, name):
    res = run_script((HEAD + LOOKALIKES[name]).lstrip("\n"))
    assert res.code == 0 and "GT874" not in res.codes(), res.findings


def test_training_bits_unchanged(tmp_path):
    """The traced run computes the same weights and statistics as a plain run."""
    import runpy

    import torch

    from gradtrace import trace

    src = (HEAD + BUGS["inference_mode_each_epoch"]).lstrip("\n")
    path = tmp_path / "prog.py"
    path.write_text(src, encoding="utf-8")
    torch.manual_seed(0)
    plain = runpy.run_path(str(path))["model"].state_dict()
    torch.manual_seed(0)
    with trace():
        traced = runpy.run_path(str(path))["model"].state_dict()
    assert all(torch.equal(plain[k], traced[k]) for k in plain)
