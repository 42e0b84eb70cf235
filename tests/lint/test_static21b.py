"""Mechanisms behind the held-out misses of session 21 in freezing, optimizer wiring, numerics,
registration, grad mode and distributed (docs/triage/static21b.md). Each was written down as one
sentence without the case's names; the twins below were written from that sentence alone (a
script, a trainer method, a Lightning step, another spelling of the API) before the reading, and
run on real torch: the bug must show (an exception, or the silent symptom in ``holds``), and the
look-alikes must stay silent and run clean.

Same harness as test_heldout_shapes.py.
"""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _run

torch = pytest.importorskip("torch")

# the model the no-grad views come from, shared by the GT218 shapes: a backbone, a projection
# head used only by the unsupervised term, and a classifier
TWO_HEADS = """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(6, 8)
        self.proj = nn.Linear(8, 4)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        h = torch.relu(self.body(x))
        return self.proj(h), self.fc(h)
"""

SHAPES: dict[str, tuple[list[Shape], list[Shape]]] = {
    # GT218: "the same model is run twice in a training step, once with grad for one loss term
    # and once under no_grad, and another whole loss term is built only from the no-grad run's
    # outputs": backward runs, that term trains nothing (the projection head never learns)
    "no-grad-run-of-trained-model-as-loss-term": ([Shape(TWO_HEADS + """
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y, xu = torch.randn(5, 6), torch.randint(0, 3, (5,)), torch.randn(5, 6)
_, logits = model(x)
with torch.no_grad():
    target = model(xu)[0].softmax(-1)
z, _ = model(xu + 0.1 * torch.randn_like(xu))
loss = F.cross_entropy(logits, y) + F.mse_loss(z.softmax(-1), target)
loss.backward()
""", "GT218", holds="model.proj.weight.grad is not None"), Shape(TWO_HEADS + """
model, teacher = Net(), Net()
x, y = torch.randn(5, 6), torch.randint(0, 3, (5,))
_, logits = model(x)
with torch.no_grad():
    t1, _ = teacher(x)
    t2, _ = teacher(x.flip(0))
loss = F.cross_entropy(logits, y) + 0.1 * F.mse_loss(t1, t2)
loss.backward()
""", "GT218", holds="model.fc.weight.grad is not None"), Shape(TWO_HEADS + """
model = Net()
x, y, xu = torch.randn(5, 6), torch.randint(0, 3, (5,)), torch.randn(5, 6)
_, logits = model(x)
with torch.no_grad():
    zu, _ = model(xu)
    spread = zu.std().item()
loss = F.cross_entropy(logits, y)
loss.backward()
print(spread)
""", "GT218", holds="model.fc.weight.grad is not None")], [Shape(TWO_HEADS + """
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y, xu, xu2 = torch.randn(5, 6), torch.randint(0, 3, (5,)), torch.randn(5, 6), torch.randn(5, 6)
for step in range(2):
    _, logits = model(x)
    with torch.no_grad():
        z1, _ = model(xu)
        z2, _ = model(xu2)
    loss = F.cross_entropy(logits, y) + 0.5 * (z1 - z2).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""", "GT218", 17, holds="model.proj.weight.grad is None"), Shape(TWO_HEADS + """
class Trainer:
    def __init__(self):
        self.net = Net()
        self.opt = torch.optim.Adam(self.net.parameters(), lr=1e-3)

    def step(self, x, y, xa, xb):
        _, logits = self.net(x)
        sup = F.cross_entropy(logits, y)
        with torch.set_grad_enabled(False):
            za, _ = self.net(xa)
            zb, _ = self.net(xb)
        unsup = 1 - F.cosine_similarity(za, zb).mean()
        loss = sup + unsup
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()

t = Trainer()
t.step(torch.randn(5, 6), torch.randint(0, 3, (5,)), torch.randn(5, 6), torch.randn(5, 6))
""", "GT218", 20, holds="t.net.proj.weight.grad is None"), Shape(TWO_HEADS + """
class LitSemi(Net):
    def training_step(self, batch, batch_idx):
        x, y, xu = batch
        _, logits = self(x)
        with torch.no_grad():
            zu, _ = self(xu)
            zu2, _ = self(xu.flip(0))
        return {"loss": F.cross_entropy(logits, y) + F.l1_loss(zu, zu2)}

lit = LitSemi()
out = lit.training_step((torch.randn(5, 6), torch.randint(0, 3, (5,)), torch.randn(5, 6)), 0)
out["loss"].backward()
""", "GT218", 16, holds="lit.proj.weight.grad is None")]),
    # GT415: "a module registers a parameter through a call that hands back the Parameter
    # itself when it moves nothing (`nn.Parameter(t).to(device)`, `.float()`,
    # `.requires_grad_(False)`), then a method rebinds that attribute to a computed tensor":
    # on CPU in its own dtype the name is a registered Parameter and the assignment raises
    "parameter-registered-through-a-no-op-move-then-rebound": ([Shape("""
class RunningNorm(nn.Module):
    def __init__(self, n, device=torch.device("cpu")):
        super().__init__()
        self.mean = nn.Parameter(torch.zeros(n), requires_grad=False).to(device)

    @torch.no_grad()
    def update(self, x):
        self.mean.mul_(0.9).add_(0.1 * x.mean(0))

norm = RunningNorm(4)
norm.update(torch.ones(8, 4))
""", "GT415", holds="abs(float(norm.mean[0]) - 0.1) < 1e-6"), Shape("""
class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(3)).double()

    def forward(self, x):
        self.w = self.w * 2
        return x * self.w

out = Scaled()(torch.ones(3, dtype=torch.float64))
""", "GT415", holds="float(out.sum()) == 6.0")], [Shape("""
class RunningNorm(nn.Module):
    def __init__(self, n, device=torch.device("cpu")):
        super().__init__()
        self.mean = nn.Parameter(torch.zeros(n), requires_grad=False).to(device)

    @torch.no_grad()
    def update(self, x):
        self.mean = 0.9 * self.mean + 0.1 * x.mean(0)

RunningNorm(4).update(torch.ones(8, 4))
""", "GT415", 8, "cannot assign"), Shape("""
class Contrast(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.temperature = nn.Parameter(torch.tensor(0.07)).float()

    def forward(self, a, b):
        self.temperature = self.temperature.clamp(min=0.01)
        return self.proj(a) @ self.proj(b).t() / self.temperature

Contrast()(torch.randn(2, 4), torch.randn(2, 4))
""", "GT415", 8, "cannot assign"), Shape("""
class Gain(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(3)).requires_grad_(False)

    def set_scale(self, s):
        self.scale = torch.as_tensor(s, dtype=torch.float32)

class Trainer:
    def __init__(self):
        self.gain = Gain()

    def calibrate(self, values):
        self.gain.set_scale(values)

Trainer().calibrate([1.0, 2.0, 3.0])
""", "GT415", 7, "cannot assign")]),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alikes_are_silent_and_run(name: str) -> None:
    goods, _ = SHAPES[name]
    assert goods
    for good in goods:
        assert _found(good) == [], good.src
        _run(good)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twins_are_reported_and_fail(name: str) -> None:
    _, bads = SHAPES[name]
    assert len(bads) >= 3
    for bad in bads:
        assert _found(bad) == [(bad.line, bad.code)], bad.src
        _run(bad)
