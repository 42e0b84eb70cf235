"""Bugs whose evidence crosses a function, a class or a scope (issue 12, held-out misses):
constructor arguments kept in fields, helpers that build the model, plain classes holding
parameters, groups never added, globals walked instead of the argument, casts of a named leaf.

Each entry: a look-alike that must stay silent and run, and buggy twins in two or more
spellings reported on the given line; all run on real torch (tests/lint/shape_runner.py).
"""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = """
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
"""

NET = """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 2)
    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))
"""

BN_NET = """
class BNNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
        self.head = nn.Linear(4, 1)
    def forward(self, x):
        return self.head(self.encoder(x))
    def _set(self, modules, flag):
        for module in modules:
            for p in module.parameters():
                p.requires_grad = flag
            for m in module.modules():
                if isinstance(m, nn.BatchNorm1d):
                    m.train(flag)
                    if not flag:
                        m.eval()
    def freeze(self):
        self._set([self.encoder], False)
"""

AGENT = """
def score(s):
    return float(s.sum() % 3)
class Reinforce:
    def __init__(self, policy, get_reward):
        self.policy = policy
        self.get_reward = get_reward
        self.opt = torch.optim.SGD(policy.parameters(), lr=0.1)
    def update(self, episodes, gamma=0.9):
        loss = 0
        self.opt.zero_grad()
        for s in episodes:
            r = self.get_reward(s)
            log_probs = F.log_softmax(self.policy(s), dim=-1)
            for a in range(2):
                loss -= TERM * r
                r = r * gamma
        loss.backward()
        self.opt.step()
        return float(loss)
agent = Reinforce(nn.Linear(4, 3), lambda s: float(s.sum() % 3))
out = agent.update([torch.randn(1, 4) for _ in range(2)])
"""

SYNTH = """
class Synth:
    def __init__(self, n):
        self.target = torch.randn(n)
        self.x = torch.rand(n).requires_grad_()
        self.opt = None
    def run(self, steps):
        if self.opt is None:
            self.opt = torch.optim.Adam([self.x], lr=0.1)
        for _ in range(steps):
            self.opt.zero_grad()
            ((self.x - self.target) ** 2).mean().backward()
            self.opt.step()
    def to(self, dtype):
        self.target = self.target.to(dtype)
        self.x = self.x.detach().to(dtype).requires_grad_()
        RESET
        return self
s = Synth(4)
s.run(2)
s.to(torch.float64)
before = s.x.detach().clone()
s.run(2)
"""

GO = """def go():
    synth = Synth(4)
    synth.run(2)
    synth.to(torch.float64)
    before = synth.x.detach().clone()
    synth.run(2)
    return torch.equal(before, synth.x)
ok = go()
"""

ORBIT = """
class Elements:
    def __init__(self, drag, mean_motion):
        self.drag = drag
        self.mean_motion = mean_motion
def propagate(el, t):
    return torch.stack([(1.0 - el.drag * t) * torch.cos(el.mean_motion * t)], dim=-1)
mlp = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.Adam(mlp.parameters(), lr=1e-3)
t = torch.linspace(0, 1, 5)
target = propagate(Elements(1e-3, 0.06), t)
for _ in range(2):
    opt.zero_grad()
    correction = mlp(torch.randn(1, 3))
    el = Elements(drag=FIELD, mean_motion=0.06)
    loss = ((propagate(el, t) - target) ** 2).mean()
    loss.backward()
    opt.step()
"""

STEPPER = """
class LossCompute:
    def __init__(self, criterion, opt=None):
        self.criterion = criterion
        self.opt = opt
    def __call__(self, y, logits):
        loss = self.criterion(logits, y)
        loss.backward()
        self.opt.step()
        self.opt.zero_grad()
        return loss.item()
model = nn.Linear(4, 8)
head = nn.Linear(8, 2)
opt = torch.optim.SGD(OPT, lr=0.1)
loss_fct = LossCompute(nn.CrossEntropyLoss(), opt)
before = head.weight.detach().clone()
for _ in range(2):
    x, y = torch.randn(3, 4), torch.randint(0, 2, (3,))
    loss_fct(y, head(model(x)))
"""

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    # a helper object given the model in its constructor replaces the model's layers
    "field-from-constructor": (Shape(NET + """
class Pruner:
    def __init__(self, model):
        self.model = model
    def prune(self):
        self.model.fc1 = nn.Linear(4, 8)
model = Net()
Pruner(model).prune()
pruner = Pruner(model)
pruner.prune()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
before = model.fc1.weight.detach().clone()
for _ in range(2):
    opt.zero_grad()
    model(torch.randn(3, 4)).sum().backward()
    opt.step()
""", "GT404", holds="not torch.equal(before, model.fc1.weight)"), [Shape(NET + """
class Pruner:
    def __init__(self, model, keep):
        self.model, self.keep = model, keep
    def prune(self):
        self.model.fc1 = nn.Linear(4, self.keep)
        self.model.fc2 = nn.Linear(self.keep, 2)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
pruner = Pruner(model, keep=8)
pruner.prune()
before = model.fc1.weight.detach().clone()
for _ in range(2):
    opt.zero_grad()
    model(torch.randn(3, 4)).sum().backward()
    opt.step()
""", "GT404", 18, holds="torch.equal(before, model.fc1.weight)"), Shape(NET + """
class Surgery:
    def __init__(self, net):
        self.net = net.train()
    def swap_head(self):
        self.net.fc2 = nn.Linear(8, 2)
def finetune(steps):
    model = Net()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    s = Surgery(model)
    s.swap_head()
    for _ in range(steps):
        optimizer.zero_grad()
        model(torch.randn(3, 4)).sum().backward()
        optimizer.step()
    return model
m = finetune(2)
""", "GT404", 18, holds="m.fc2.weight.grad is not None")]),
    # a same-file helper that builds a new model, called after the optimizer was built
    "model-rebuilt-by-helper": (Shape("""
def build_model():
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    return net.train()
def train():
    model = build_model()
    model = model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        model(torch.randn(3, 4)).sum().backward()
        opt.step()
    return model
train()
""", "GT404"), [Shape("""
def build_model():
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
def train():
    model = build_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model = build_model()
    before = model[0].weight.detach().clone()
    for _ in range(2):
        opt.zero_grad()
        model(torch.randn(3, 4)).sum().backward()
        opt.step()
    return torch.equal(before, model[0].weight)
assert train()
""", "GT404", 6), Shape("""
class Trainer:
    def make(self):
        return nn.Linear(4, 2)
    def run(self):
        model = self.make()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model = self.make()
        for _ in range(2):
            opt.zero_grad()
            model(torch.randn(3, 4)).sum().backward()
            opt.step()
        return model
m = Trainer().run()
""", "GT404", 7, holds="m.weight.grad is not None")]),
    # nested plain containers of parameters: the inner dict is the line to change
    "nested-plain-dict-of-parameters": (Shape("""
class RelNet(nn.Module):
    def __init__(self, n=2):
        super().__init__()
        self.enc = nn.Linear(4, 2)
        self.w = nn.ModuleList()
        for _ in range(n):
            self.w.append(nn.ParameterDict({'a': nn.Parameter(torch.ones(1, 2))}))
    def forward(self, x, r):
        return self.enc(x) * self.w[r]['a']
m = RelNet()
m(torch.randn(3, 4), 1).sum().backward()
""", "GT401", holds="len(list(m.parameters())) == 4"), [Shape("""
class RelNet(nn.Module):
    def __init__(self, n=2):
        super().__init__()
        self.enc = nn.Linear(4, 2)
        self.w = {}
        for r in range(n):
            self.w[r] = {'a': nn.Parameter(torch.ones(1, 2)), 'b': nn.Parameter(torch.zeros(2))}
    def forward(self, x, r):
        return self.enc(x) * self.w[r]['a'] + self.w[r]['b']
m = RelNet()
m(torch.randn(3, 4), 1).sum().backward()
""", "GT401", 7, holds="len(list(m.parameters())) == 2"), Shape("""
class Experts(nn.Module):
    def __init__(self, n=2):
        super().__init__()
        self.gate = nn.Linear(4, n)
        self.experts = []
        for _ in range(n):
            self.experts.append([nn.Parameter(torch.randn(4, 2)), nn.Parameter(torch.zeros(2))])
    def forward(self, x):
        w, b = self.experts[0]
        return x @ w + b + self.gate(x).sum()
m = Experts()
m(torch.randn(3, 4)).sum().backward()
""", "GT401", 7, holds="len(list(m.parameters())) == 2")]),
    # a plain class holding a Parameter or a layer, stored by a module and run in forward
    "parameters-in-plain-class": (Shape("""
class Head:
    def __init__(self):
        self.weight = nn.Parameter(torch.randn(2, 4))
    def __call__(self, h):
        return F.linear(h, self.weight)
class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.head = Head()
    def forward(self, x):
        return self.head(self.body(x))
model = LM()
opt = torch.optim.SGD(list(model.parameters()) + [model.head.weight], lr=0.1)
model(torch.randn(3, 4)).sum().backward()
opt.step()
""", "GT413", holds="len(opt.param_groups[0]['params']) == 3"), [Shape("""
class Head:
    def __init__(self):
        self.weight = nn.Parameter(torch.randn(2, 4))
    def __call__(self, h):
        return F.linear(h, self.weight)
class LM(nn.Module):
    def __init__(self, tie=False):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.head = None if tie else Head()
    def forward(self, x):
        return self.head(self.body(x))
model = LM()
""", "GT413", 1, holds="len(list(model.parameters())) == 2"), Shape("""
class Projector(object):
    def __init__(self, d):
        self.proj = nn.Linear(d, 2)
    def project(self, h):
        return self.proj(h)
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(4, 4)
        self.projector = Projector(4)
    def forward(self, x):
        return self.projector.project(self.enc(x))
model = Model()
""", "GT413", 1, holds="len(list(model.parameters())) == 2")]),
    # a parameter-group dict filled with parameters and never given to the optimizer
    "param-group-never-added": (Shape("""
model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
def build(model):
    groups = []
    for i, layer in enumerate(model):
        g = {'lr': 0.1 * (i + 1)}
        g['params'] = list(layer.parameters())
        groups.append(g)
    extra = {'params': nn.Linear(2, 2).parameters(), 'lr': 1.0}
    opt = torch.optim.SGD(groups, lr=0.1)
    opt.add_param_group(extra)
    return opt
opt = build(model)
""", "GT442", holds="len(opt.param_groups) == 3"), [Shape("""
model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
def build(model):
    groups = []
    g = {'lr': 0.1}
    g['params'] = list(model[0].parameters())
    groups.append(g)
    g = {'lr': 1.0}
    g['params'] = list(model[1].parameters())
    return torch.optim.SGD(groups)
opt = build(model)
""", "GT442", 8, holds="len(opt.param_groups) == 1"), Shape("""
model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
base = {'params': model[0].parameters(), 'lr': 0.1}
head = {'params': model[1].parameters(), 'lr': 1.0}
opt = torch.optim.SGD([base], lr=0.1)
""", "GT442", 3, holds="len(opt.param_groups) == 1")]),
    # a helper given a model freezes a module-level model instead
    "freeze-walks-global": (Shape("""
def freeze(model, n):
    for i, layer in enumerate(model.children()):
        if i < n:
            for p in layer.parameters():
                p.requires_grad_(False)
    return model
net = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
def trial():
    m = freeze(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2)), 1)
    return m
m = trial()
""", "GT414", holds="not m[0].weight.requires_grad"), [Shape("""
def freeze(model, n):
    for i, layer in enumerate(net.children()):
        if i < n:
            for p in layer.parameters():
                p.requires_grad_(False)
    return model
net = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
def trial():
    m = freeze(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2)), 1)
    return m
m = trial()
""", "GT414", 2, holds="m[0].weight.requires_grad"), Shape("""
def set_trainable(model, flag):
    for name, p in backbone.named_parameters():
        p.requires_grad = flag
backbone = nn.Linear(4, 4)
head = nn.Linear(4, 2)
set_trainable(head, False)
""", "GT414", 2, holds="head.weight.requires_grad")]),
    # a named leaf cast to another dtype: the cast is a non-leaf copy
    "cast-of-named-leaf": (Shape("""
w = torch.tensor([1., 2.], requires_grad=True)
w1 = w.type(torch.float)
(w1 * w1).mean().backward()
print(w1.grad)
""", "GT305", holds="w1.grad is not None and w1 is w"), [Shape("""
w = torch.tensor([1., 2.], dtype=torch.float64, requires_grad=True)
w1 = w.type(torch.float)
(w1 * w1).mean().backward()
print(w1.grad)
""", "GT305", 2, holds="w1.grad is None"), Shape("""
def fit():
    w = torch.randn(3, requires_grad=True)
    wd = w.double()
    opt = torch.optim.SGD([wd], lr=0.1)
fit()
""", "GT305", 3, raises=(ValueError, "non-leaf"))]),
    # a slice of a requires-grad attribute stored in __init__, given to an optimizer in another
    # method: a view with a grad_fn, not a leaf
    "sliced-attribute-optimized": (Shape("""
class Prompt(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Embedding(10, 4)
        with torch.no_grad():
            self.table = self.enc(torch.arange(6))
        self.part = self.table[1:3].clone().requires_grad_()
    def configure_optimizers(self):
        return torch.optim.Adam([self.part], lr=0.1)
opt = Prompt().configure_optimizers()
""", "GT306"), [Shape("""
class Prompt(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Embedding(10, 4)
        with torch.no_grad():
            self.table = self.enc(torch.arange(6))
        self.table.requires_grad_(True)
        self.part = self.table[1:3]
    def configure_optimizers(self):
        return torch.optim.Adam([self.part], lr=0.1)
opt = Prompt().configure_optimizers()
""", "GT306", 8, raises=(ValueError, "non-leaf")), Shape("""
class Tuner:
    def __init__(self):
        self.w = nn.Parameter(torch.randn(4, 4))
        self.rows = self.w[:2]
    def fit(self):
        opt = torch.optim.SGD([self.rows], lr=0.1)
        return opt
Tuner().fit()
""", "GT306", 4, raises=(ValueError, "non-leaf"))]),
    # a freeze that puts a submodule's BatchNorm in eval mode, undone by `model.train()` at the
    # top of each epoch
    "frozen-eval-undone-by-train": (Shape(BN_NET + """
model = BNNet()
model.freeze()
bn = model.encoder[1]
before = bn.running_mean.clone()
opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
for epoch in range(2):
    model.train()
    model.freeze()
    opt.zero_grad()
    model(torch.randn(8, 4) + 2).sum().backward()
    opt.step()
""", "GT443", holds="torch.equal(before, bn.running_mean)"), [Shape(BN_NET + """
model = BNNet()
model.freeze()
bn = model.encoder[1]
before = bn.running_mean.clone()
opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
for epoch in range(2):
    model.train()
    opt.zero_grad()
    model(torch.randn(8, 4) + 2).sum().backward()
    opt.step()
""", "GT443", 26, holds="not torch.equal(before, bn.running_mean)"), Shape(BN_NET + """
def finetune(model, steps):
    model.encoder.eval()
    model.encoder.requires_grad_(False)
    opt = torch.optim.SGD(model.head.parameters(), lr=0.1)
    for _ in range(steps):
        model.train()
        opt.zero_grad()
        model(torch.randn(8, 4) + 2).sum().backward()
        opt.step()
    return model
m = finetune(BNNet(), 2)
""", "GT443", 25, holds="m.encoder.training")]),
    # a reward callable the constructor was given returns a Python number: `.item()` of the
    # log-probability times it leaves nothing of the loss on the graph
    "item-times-number-callable": (Shape(AGENT.replace("TERM", "log_probs[0, a]"), "GT102",
                                         holds="out > -1e9"),
                                   [Shape(AGENT.replace("TERM", "log_probs[0, a].item()"),
                                          "GT102", 15, raises=(AttributeError, "backward")),
                                    Shape(AGENT.replace("TERM", "log_probs[0, a].item()")
                                          .replace("lambda s: float(s.sum() % 3)", "score"),
                                          "GT102", 15, raises=(AttributeError, "backward"))]),
    # a helper of the file rebuilds the sequence of requires-grad tensors its caller passes
    "passed-tensors-rebuilt": (Shape("""
def as_tensor(data, dtype=None):
    if isinstance(data, torch.Tensor):
        return data
    if isinstance(data, (list, tuple)):
        return torch.stack(list(data))
    return torch.as_tensor(data, dtype=dtype)
C1 = torch.tensor(1.0, requires_grad=True)
C2 = torch.tensor(0.5, requires_grad=True)
for _ in range(2):
    c = as_tensor((C1, C2))
    (c ** 2).sum().backward()
""", "GT111", holds="C1.grad is not None"), [Shape("""
def as_tensor(data, dtype=None):
    if isinstance(data, torch.Tensor):
        return data if dtype is None else data.to(dtype)
    return torch.as_tensor(data, dtype=dtype)
C1 = torch.tensor(1.0, requires_grad=True)
C2 = torch.tensor(0.5, requires_grad=True)
x = torch.randn(4, requires_grad=True)
for _ in range(2):
    c = as_tensor((C1, C2))
    (x * c[0] + c[1]).sum().backward()
""", "GT111", 4, holds="C1.grad is None"), Shape("""
def pack(values):
    return torch.tensor(values)
def step(w1, w2, x):
    loss = (pack([w1, w2]) * x).sum()
    loss.backward()
w = nn.Parameter(torch.tensor(1.0))
def fit():
    a = nn.Parameter(torch.tensor(1.0))
    b = nn.Parameter(torch.tensor(2.0))
    x = torch.randn(2, requires_grad=True)
    loss = (pack([a, b]) * x).sum()
    loss.backward()
    return a
a = fit()
""", "GT111", 2, holds="a.grad is None")]),
    # an optimizer built once, lazily, over a tensor another method re-creates between runs
    "lazy-optimizer-stale-tensor": (Shape(SYNTH.replace("RESET", "self.opt = None"), "GT404",
                                          holds="not torch.equal(before, s.x)"),
                                    [Shape(SYNTH.replace("RESET", "pass"), "GT404", 15,
                                           holds="torch.equal(before, s.x)"),
                                     Shape(SYNTH.replace("RESET", "pass").split("s = ")[0]
                                           + GO, "GT404", 15, holds="ok")]),
    # a plain record class holds what it is built from: `.item()` in its field is a cut
    "number-in-record-field": (Shape(ORBIT.replace("FIELD", "correction.squeeze()"), "GT102",
                                     holds="mlp[0].weight.grad is not None"),
                               [Shape(ORBIT.replace("FIELD", "correction.squeeze().item()"),
                                      "GT102", 14, raises=(RuntimeError, "does not require grad")),
                                Shape(ORBIT.replace("FIELD", "float(correction)"),
                                      "GT102", 14, raises=(RuntimeError, "does not require grad"))
                                ]),
    # a helper writes in place into the Parameter its caller passes (grad enabled there)
    "inplace-into-passed-parameter": (Shape("""
def fixed_init(w, value):
    w.fill_(value)
    w.requires_grad_(False)
emb = nn.Embedding(10, 4)
with torch.no_grad():
    fixed_init(emb.weight, 0.5)
""", "GT302", holds="not emb.weight.requires_grad"), [Shape("""
def sinusoid(n, dim, E):
    E[:, 0::2] = torch.ones(n, dim // 2)
    E.requires_grad = False
class Emb(nn.Module):
    def __init__(self):
        super().__init__()
        self.pos = nn.Embedding(10, 4)
        sinusoid(n=10, dim=4, E=self.pos.weight)
Emb()
""", "GT302", 2, raises=(RuntimeError, "leaf Variable")), Shape("""
def fixed_init(w, value):
    w.fill_(value)
    w.requires_grad_(False)
def build():
    scale = nn.Parameter(torch.ones(3))
    fixed_init(scale, 0.5)
    return scale
build()
""", "GT302", 2, raises=(RuntimeError, "leaf Variable"))]),
    # the loop trains through an object given the optimizer (its method runs backward and
    # steps it): a module built beside the model runs in the loop but is in no optimizer
    "module-outside-optimizer-via-object": (Shape(STEPPER.replace(
        "OPT", "list(model.parameters()) + list(head.parameters())"), "GT438",
        holds="not torch.equal(before, head.weight)"), [Shape(STEPPER.replace(
            "OPT", "model.parameters()"), "GT438", 13, holds="torch.equal(before, head.weight)"),
        Shape(STEPPER.replace("OPT", "model.parameters()").replace(
            "def __call__(self, y, logits)", "def update(self, y, logits)").replace(
            "loss_fct(y, head(model(x)))", "loss_fct.update(y, head(model(x)))"),
            "GT438", 13, holds="torch.equal(before, head.weight)")]),
}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name,i", [(n, i) for n in sorted(SHAPES)
                                    for i in range(len(SHAPES[n][1]))])
def test_buggy_twin_is_reported(name: str, i: int) -> None:
    judge(PRELUDE, SHAPES[name][1][i])
