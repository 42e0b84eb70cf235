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

from tests.lint import shape_runner
from tests.lint.test_shapes_distributed import PRELUDE as DDP_PRELUDE
from tests.lint.test_shapes_distributed import REDUCTION

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

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

# a frozen-backbone classifier, with BatchNorm (statistics that move in train mode) or with
# LayerNorm only (none), and the batches it trains on
BN_NET = """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU())
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.backbone(x))

BATCHES = [(torch.randn(8, 4) * 3 + 2, torch.randint(0, 2, (8,))) for _ in range(3)]
"""
# a head whose layer is built at the first forward, when the input size is known
LAZY = """
class LazyHead(nn.Module):
    def __init__(self, n_out):
        super().__init__()
        self.n_out = n_out
        self.pre = nn.Linear(4, 4)
        self.proj = None

    def forward(self, x):
        x = self.pre(x)
        if self.proj is None:
            self.proj = nn.Linear(x.shape[-1], self.n_out)
        return self.proj(x)
"""
# a model whose forward raises on some inputs (a bad batch in evaluation)
FLAKY = """
class Flaky(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        if x.abs().max() > 50:
            raise ValueError("bad batch")
        return self.fc(x)
"""
LN_NET = BN_NET.replace("nn.BatchNorm1d(8)", "nn.LayerNorm(8)")

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
    # GT766: "the square root of a sum of squares is kept off zero by an epsilon added (or a
    # clamp) after the root instead of inside it": where the sum is 0 the root's derivative
    # is infinite and the gradient is NaN
    "epsilon-after-root-of-squares": ([Shape("""
def normalize_tensor(feat, eps=1e-10):
    return feat / torch.sqrt(torch.sum(feat ** 2, dim=1, keepdim=True) + eps)

lin = nn.Linear(3, 4, bias=False)
x = torch.randn(4, 3)
x[0] = 0.0
with torch.autograd.detect_anomaly():
    normalize_tensor(torch.relu(lin(x))).sum().backward()
""", "GT766", holds="not torch.isnan(lin.weight.grad).any()"), Shape("""
def normalize(feat, eps=1e-10):
    return feat / (feat.norm(dim=1, keepdim=True) + eps)

lin = nn.Linear(3, 4, bias=False)
x = torch.randn(4, 3)
x[0] = 0.0
with torch.autograd.detect_anomaly():
    normalize(torch.relu(lin(x))).sum().backward()
""", "GT766", holds="not torch.isnan(lin.weight.grad).any()"), Shape("""
def standardize(batch, eps=1e-6):
    scale = torch.sqrt((batch ** 2).mean(0)) + eps
    return batch / scale

lin = nn.Linear(3, 2)
x = standardize(torch.cat([torch.zeros(4, 1), torch.randn(4, 2)], 1))
lin(x).sum().backward()
""", "GT766", holds="not torch.isnan(lin.weight.grad).any()")], [Shape("""
def normalize_tensor(feat, eps=1e-10):
    norm = torch.sqrt(torch.sum(feat ** 2, dim=1, keepdim=True))
    return feat / (norm + eps)

class Perceptual(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 4, bias=False)

    def forward(self, a, b):
        fa, fb = torch.relu(self.lin(a)), torch.relu(self.lin(b))
        return (normalize_tensor(fa) - normalize_tensor(fb)).pow(2).sum()

m = Perceptual()
a, b = torch.randn(4, 3), torch.randn(4, 3)
a[0] = 0.0
with torch.autograd.detect_anomaly():
    m(a, b).backward()
""", "GT766", 2, "returned nan"), Shape("""
class Embed(nn.Module):
    def __init__(self, eps=1e-8):
        super().__init__()
        self.fc = nn.Linear(3, 4, bias=False)
        self.eps = eps

    def forward(self, x):
        z = torch.relu(self.fc(x))
        return z / (z.pow(2).sum(-1, keepdim=True).sqrt() + self.eps)

e = Embed()
x = torch.randn(4, 3)
x[1] = 0.0
with torch.autograd.detect_anomaly():
    e(x).sum().backward()
""", "GT766", 9, "returned nan"), Shape("""
enc = nn.Linear(3, 4, bias=False)
opt = torch.optim.SGD(enc.parameters(), lr=0.1)
x = torch.randn(4, 3)
x[2] = 0.0
z = torch.relu(enc(x))
length = (z * z).sum(1, keepdim=True) ** 0.5
loss = (z / (length + 1e-6)).sum()
with torch.autograd.detect_anomaly():
    loss.backward()
""", "GT766", 6, "returned nan"), Shape("""
class Trainer:
    def __init__(self):
        self.net = nn.Linear(3, 4, bias=False)

    def loss(self, x):
        h = torch.relu(self.net(x))
        rms = torch.sqrt(torch.mean(h ** 2, -1, keepdim=True)).clamp(min=1e-6)
        return (h / rms).sum()

t = Trainer()
x = torch.randn(4, 3)
x[3] = 0.0
with torch.autograd.detect_anomaly():
    t.loss(x).backward()
""", "GT766", 7, "returned nan")]),
    # GT461: "a trainer freezes part of a model with requires_grad=False when it is built, and
    # its training method calls model.train() every epoch": the frozen part's BatchNorm
    # running statistics keep moving with the new data
    "part-frozen-in-constructor-then-train-mode-each-epoch": ([Shape(BN_NET + """
class Trainer:
    def __init__(self, model):
        self.model = model
        self.model.backbone.requires_grad_(False)
        self.opt = torch.optim.SGD(self.model.head.parameters(), lr=0.1)

    def fit(self, batches, epochs=2):
        for epoch in range(epochs):
            self.model.train()
            self.model.backbone.eval()
            for x, y in batches:
                loss = F.cross_entropy(self.model(x), y)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()

net = Net()
before = net.backbone[1].running_mean.clone()
Trainer(net).fit(BATCHES)
""", "GT461", holds="torch.equal(net.backbone[1].running_mean, before)"), Shape(LN_NET + """
class Trainer:
    def __init__(self, model):
        self.model = model
        self.model.backbone.requires_grad_(False)
        self.opt = torch.optim.SGD(self.model.head.parameters(), lr=0.1)

    def fit(self, batches, epochs=2):
        for epoch in range(epochs):
            self.model.train()
            for x, y in batches:
                loss = F.cross_entropy(self.model(x), y)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()

net = Net()
Trainer(net).fit(BATCHES)
""", "GT461", holds="net.head.weight.grad is not None")], [Shape(BN_NET + """
class Trainer:
    def __init__(self, model, freeze=("backbone.",)):
        self.model = model
        for name, p in self.model.named_parameters():
            if any(name.startswith(f) for f in freeze):
                p.requires_grad = False
        self.opt = torch.optim.SGD([p for p in self.model.parameters() if p.requires_grad], lr=0.1)

    def fit(self, batches, epochs=2):
        for epoch in range(epochs):
            self.model.train()
            for x, y in batches:
                loss = F.cross_entropy(self.model(x), y)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()

net = Net()
before = net.backbone[1].running_mean.clone()
Trainer(net).fit(BATCHES)
""", "GT461", 22, holds="not torch.equal(net.backbone[1].running_mean, before)"), Shape(BN_NET + """
class Finetuner:
    def __init__(self, model):
        self.model = model
        self.model.backbone.requires_grad_(False)
        self.opt = torch.optim.Adam(self.model.head.parameters(), lr=1e-3)

    def train_epoch(self, batches):
        self.model.train()
        for x, y in batches:
            self.opt.zero_grad()
            F.cross_entropy(self.model(x), y).backward()
            self.opt.step()

net = Net()
before = net.backbone[1].running_mean.clone()
tuner = Finetuner(net)
for epoch in range(2):
    tuner.train_epoch(BATCHES)
""", "GT461", 19, holds="not torch.equal(net.backbone[1].running_mean, before)"), Shape(BN_NET + """
class Probe:
    def __init__(self, model):
        self.model = model
        self._freeze_backbone()
        self.opt = torch.optim.SGD(self.model.head.parameters(), lr=0.1)

    def _freeze_backbone(self):
        for p in self.model.backbone.parameters():
            p.requires_grad = False

    def run(self, batches, epochs=2):
        for epoch in range(epochs):
            self.model.train()
            for x, y in batches:
                loss = F.cross_entropy(self.model(x), y)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()

net = Net()
before = net.backbone[1].running_mean.clone()
Probe(net).run(BATCHES)
""", "GT461", 24, holds="not torch.equal(net.backbone[1].running_mean, before)")]),
    # GT464: "an optimizer is built over a module's parameters before the module's first
    # forward, and that forward creates a layer with weights lazily": the optimizer never
    # holds the new layer, which keeps its initial weights
    # the buggy twin whose user builds the optimizer is named at the layer's line (NOTE [lazy layer line])
    "optimizer-before-lazy-layer": ([Shape(LAZY + """
net = LazyHead(2)
net(torch.zeros(1, 4))
opt = torch.optim.SGD(net.parameters(), lr=0.5)
w0 = net.proj.weight.detach().clone()
for _ in range(3):
    opt.zero_grad()
    net(torch.randn(8, 4)).pow(2).mean().backward()
    opt.step()
""", "GT464", holds="not torch.equal(net.proj.weight, w0)"), Shape("""
class LazyAct(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.act = None
        self.opt = torch.optim.SGD(self.parameters(), lr=0.5)

    def forward(self, x):
        if self.act is None:
            self.act = nn.Tanh()
        return self.act(self.fc(x))

m = LazyAct()
w0 = m.fc.weight.detach().clone()
m.opt.zero_grad()
m(torch.randn(8, 4)).pow(2).mean().backward()
m.opt.step()
""", "GT464", holds="not torch.equal(m.fc.weight, w0)")], [Shape(LAZY + """
net = LazyHead(2)
opt = torch.optim.SGD(net.parameters(), lr=0.5)
net(torch.zeros(1, 4))
w0 = net.proj.weight.detach().clone()
for _ in range(3):
    opt.zero_grad()
    net(torch.randn(8, 4)).pow(2).mean().backward()
    opt.step()
""", "GT464", 11, holds="torch.equal(net.proj.weight, w0)"), Shape("""
class Policy(nn.Module):
    def __init__(self, n_actions, optimizer_class=torch.optim.Adam, lr=3e-3):
        super().__init__()
        self.body = None
        self.head = nn.Linear(8, n_actions)
        self.optimizer = optimizer_class(self.parameters(), lr=lr)

    def _features(self, obs):
        if self.body is None:
            self.body = nn.Sequential(nn.Linear(obs.shape[-1], 8), nn.ReLU())
        return self.body(obs)

    def forward(self, obs):
        return self.head(self._features(obs))

pi = Policy(3)
pi(torch.zeros(1, 5))
w0 = pi.body[0].weight.detach().clone()
for _ in range(3):
    pi.optimizer.zero_grad()
    F.cross_entropy(pi(torch.randn(8, 5)), torch.randint(0, 3, (8,))).backward()
    pi.optimizer.step()
""", "GT464", 6, holds="torch.equal(pi.body[0].weight, w0)"), Shape(LAZY + """
class Trainer:
    def __init__(self):
        self.model = LazyHead(2)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-2)

    def step(self, x):
        self.opt.zero_grad()
        loss = self.model(x).pow(2).mean()
        loss.backward()
        self.opt.step()

t = Trainer()
t.step(torch.zeros(1, 4))
w0 = t.model.proj.weight.detach().clone()
for _ in range(3):
    t.step(torch.randn(8, 4))
""", "GT464", 11, holds="torch.equal(t.model.proj.weight, w0)")]),
    # GT219: "grad mode is switched off by a plain call and switched back on later in the same
    # function, not in a finally; a caller catches an error raised in between and goes on
    # training": grad stays off and the next backward has no graph
    "grad-left-off-after-caught-error": ([Shape(FLAKY + """
def evaluate(model, batches):
    torch.set_grad_enabled(False)
    try:
        return [model(x).sum().item() for x in batches]
    finally:
        torch.set_grad_enabled(True)

model = Flaky()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    opt.zero_grad()
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    try:
        evaluate(model, [torch.full((2, 4), 100.0)])
    except ValueError:
        pass
""", "GT219", holds="torch.is_grad_enabled()"), Shape(FLAKY + """
def evaluate(model, batches):
    with torch.no_grad():
        return [model(x).sum().item() for x in batches]

model = Flaky()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    opt.zero_grad()
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    try:
        evaluate(model, [torch.full((2, 4), 100.0)])
    except ValueError:
        pass
""", "GT219", holds="torch.is_grad_enabled()")], [Shape(FLAKY + """
def evaluate(model, batches):
    torch.set_grad_enabled(False)
    scores = [model(x).sum().item() for x in batches]
    torch.set_grad_enabled(True)
    return scores

model = Flaky()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    opt.zero_grad()
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    try:
        evaluate(model, [torch.full((2, 4), 100.0)])
    except ValueError:
        pass
""", "GT219", 12, "does not require grad"), Shape(FLAKY + """
class Trainer:
    def __init__(self, model):
        self.model = model
        self.opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def validate(self, batches):
        self.model.eval()
        torch.set_grad_enabled(False)
        losses = [self.model(x).pow(2).mean() for x in batches]
        torch.set_grad_enabled(True)
        self.model.train()
        return losses

    def fit(self, train, val, epochs=2):
        for epoch in range(epochs):
            for x in train:
                self.opt.zero_grad()
                self.model(x).sum().backward()
                self.opt.step()
            try:
                self.validate(val)
            except Exception as e:
                print("validation failed:", e)

Trainer(Flaky()).fit([torch.randn(2, 4)], [torch.full((2, 4), 100.0)])
""", "GT219", 18, "does not require grad"), Shape(FLAKY + """
def sample(model, n):
    prev = torch.is_grad_enabled()
    torch.set_grad_enabled(False)
    out = model(torch.full((n, 4), 100.0 if n > 1 else 0.0))
    torch.set_grad_enabled(prev)
    return out

def train(model, steps):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        loss = model(torch.randn(2, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        try:
            sample(model, 2)
        except ValueError:
            continue

train(Flaky(), 2)
""", "GT219", 13, "does not require grad")]),
    # GT401: "a module keeps in a plain attribute the layers its caller builds and passes in
    # (a list comprehension, a list, or *args)": parameters() misses them, they never train
    "layers-passed-in-kept-in-plain-attribute": ([Shape("""
class Chain(nn.Module):
    def __init__(self, blocks):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x

blocks = [nn.Linear(4, 4) for _ in range(3)]
net = Chain(blocks)
""", "GT401", holds="len(list(net.parameters())) == 6"), Shape("""
class Compose(nn.Module):
    def __init__(self, *fns):
        super().__init__()
        self.fns = list(fns)

    def forward(self, x):
        for f in self.fns:
            x = f(x)
        return x

out = Compose(torch.relu, torch.tanh)(torch.randn(2, 3))
""", "GT401", holds="out.shape == (2, 3)")], [Shape("""
class Chain(nn.Module):
    def __init__(self, blocks):
        super().__init__()
        self.blocks = blocks

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x

blocks = [nn.Linear(4, 4) for _ in range(3)]
net = Chain(blocks)
""", "GT401", 4, holds="len(list(net.parameters())) == 0"), Shape("""
class Stack(nn.Module):
    def __init__(self, *layers):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))
        self.layers = list(layers)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x * self.scale

net = Stack(nn.Linear(4, 4), nn.Linear(4, 2))
""", "GT401", 5, holds="len(list(net.parameters())) == 1"), Shape("""
class MultiHead(nn.Module):
    def __init__(self, heads):
        super().__init__()
        self.heads = heads

    def forward(self, x):
        return [h(x) for h in self.heads]

class Trainer:
    def __init__(self, d, tasks):
        self.net = MultiHead([nn.Linear(d, k) for k in tasks])

net = Trainer(4, (1, 2)).net
""", "GT401", 4, holds="len(list(net.parameters())) == 0")]),
}


@pytest.fixture(autouse=True)
def grad_mode_restored():
    """The GT219 twins leave grad off in this process, as the bug does: switch it back."""
    yield
    torch.set_grad_enabled(True)


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
        try:
            _run(bad)
        finally:
            torch.set_grad_enabled(True)


# GT451: "a model wrapped in DistributedDataParallel without find_unused_parameters runs, in
# forward, one entry of a ModuleList/ModuleDict of layers chosen by an argument of forward":
# the other entries get no gradient in that iteration and the next forward raises
PER_TASK = """
class PerTask(nn.Module):
    def __init__(self, tasks=3):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.heads = nn.ModuleList([nn.Linear(4, 2) for _ in range(tasks)])

    def forward(self, x, task_id):
        return self.heads[task_id](torch.relu(self.body(x)))
"""
DDP_SHAPES: dict[str, tuple[list[shape_runner.Shape], list[shape_runner.Shape]]] = {
    "entry-of-container-picked-by-forward-argument": ([shape_runner.Shape(PER_TASK + """
model = DDP(PerTask(), find_unused_parameters=True)
for step in range(3):
    model(torch.randn(2, 4), step % 3).sum().backward()
""", "GT451", holds="model.module.heads[2].weight.grad is not None"), shape_runner.Shape("""
class AllHeads(nn.Module):
    def __init__(self, tasks=3):
        super().__init__()
        self.heads = nn.ModuleList([nn.Linear(4, 2) for _ in range(tasks)])

    def forward(self, x, task_id):
        outs = [head(x) for head in self.heads]
        return outs[task_id] + 0 * sum(o.sum() for o in outs)

model = DDP(AllHeads())
for step in range(3):
    model(torch.randn(2, 4), step % 3).sum().backward()
""", "GT451", holds="model.module.heads[1].weight.grad is not None"), shape_runner.Shape("""
class Staged(nn.Module):
    def __init__(self):
        super().__init__()
        self.stages = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])

    def forward(self, x):
        for i in range(len(self.stages)):
            x = self.stages[i](x)
        return x

model = DDP(Staged())
for step in range(2):
    model(torch.randn(2, 4)).sum().backward()
""", "GT451"), shape_runner.Shape(PER_TASK + """
model = DDP(PerTask())
for step in range(3):
    x = torch.randn(2, 4)
    outs = [model(x, t) for t in range(3)]
    sum(o.sum() for o in outs).backward()
""", "GT451", holds="model.module.heads[2].weight.grad is not None")], [
    shape_runner.Shape(PER_TASK + """
model = DDP(PerTask())
for step in range(3):
    model(torch.randn(2, 4), step % 3).sum().backward()
""", "GT451", 10, REDUCTION), shape_runner.Shape(PER_TASK + """
model = DDP(PerTask())
for step in range(2):
    x = torch.randn(2, 4)
    for t in range(3):
        model(x, t).sum().backward()
""", "GT451", 10, REDUCTION), shape_runner.Shape("""
VOXELS = {"s1": 5, "s2": 6}

class CrossSubject(nn.Module):
    def __init__(self):
        super().__init__()
        self.adapters = nn.ModuleDict({s: nn.Linear(v, 4) for s, v in VOXELS.items()})
        self.shared = nn.Linear(4, 2)

    def forward(self, voxels, subject):
        key = f"{subject}"
        return self.shared(F.gelu(self.adapters[key](voxels)))

def train(net, batches):
    model = DistributedDataParallel(net)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for subject, x in batches:
        loss = model(x, subject).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

train(CrossSubject(), [("s1", torch.randn(3, 5)), ("s2", torch.randn(3, 6))])
""", "GT451", 14, REDUCTION), shape_runner.Shape("""
class MultiDomain(nn.Module):
    def __init__(self, domains=("photo", "sketch")):
        super().__init__()
        self.stem = nn.Linear(4, 4)
        self.norms = nn.ModuleDict({d: nn.Linear(4, 4) for d in domains})
        self.cls = nn.Linear(4, 3)

    def forward(self, x, domain):
        h = self.stem(x)
        h = self.norms[domain](h)
        return self.cls(h)

class Trainer:
    def __init__(self):
        self.model = DDP(MultiDomain())
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def step(self, x, y, domain):
        loss = F.cross_entropy(self.model(x, domain), y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()

t = Trainer()
for domain in ("photo", "sketch"):
    t.step(torch.randn(2, 4), torch.tensor([0, 1]), domain)
""", "GT451", 15, REDUCTION)]),
}


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    store = tmp_path_factory.mktemp("pg") / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize("name", sorted(DDP_SHAPES))
def test_ddp_look_alikes_silent_and_twins_reported_and_fail(name: str, group: None) -> None:
    goods, bads = DDP_SHAPES[name]
    assert goods and len(bads) >= 3
    for shape in (*goods, *bads):
        shape_runner.judge(DDP_PRELUDE, shape)
