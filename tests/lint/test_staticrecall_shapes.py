"""Facts followed across functions and objects (issues 12, 13: helper "staticrecall").

- a helper that cuts what it returns, reached through another helper (NOTE [helper cuts]);
- a method the training loop calls on the model at every step, as `forward` is
  (NOTE [per-step methods]);
- a Parameter `__init__` registers, written in place by `forward`
  (NOTE [trained parameter attributes]);
- the kind of a loop variable over a list of modules, and a helper writing in place into the
  Parameter its caller passes (e2cnn's `generalized_he_init(conv.weights, ...)`);
- `self.x` read in one method and stored cut by another (NOTE [attribute origins]);
- a function is a loss function when a caller backpropagates what it returns
  (NOTE [backpropagated returns]), whatever its name;
- a module of the file called through an instance runs its `forward`, which may cut what every
  caller gets (`return torch.round(out)`; NOTE [helper cuts]);
- the kind of `self.x` kept from a constructor argument is what every `Cls(...)` passes (GT114:
  NumPy given a Parameter that requires grad).

Each entry: a look-alike that must stay silent and run, and buggy twins in two or more
spellings reported on the given line; all run on real torch (tests/lint/shape_runner.py).
"""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = """
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
"""

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    # GT106 two helpers deep: the outer helper returns what the inner one rebuilt
    "helper-cut-two-calls-deep": (Shape("""
        def as_leaf(v):
            return torch.tensor(v.item(), requires_grad=True)
        def compute_loss(out, y):
            loss = F.mse_loss(out, y)
            logged = as_leaf(loss)
            return loss
        model = nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in [(torch.randn(4, 3), torch.randn(4, 1))]:
            loss = compute_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT10", holds="model.weight.grad is not None"), [Shape("""
        def as_leaf(v):
            return torch.tensor(v.item(), requires_grad=True)
        def compute_loss(out, y):
            return as_leaf(F.mse_loss(out, y))
        model = nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in [(torch.randn(4, 3), torch.randn(4, 1))]:
            loss = compute_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT106", 2, holds="model.weight.grad is None"), Shape("""
        class Trainer:
            def __init__(self):
                self.net = nn.Linear(3, 2)
                self.opt = torch.optim.Adam(self.net.parameters(), lr=0.01)
            def _scalar(self, t):
                total = t.sum()
                return torch.tensor(float(total), requires_grad=True)
            def objective(self, x):
                err = (self.net(x) ** 2).mean()
                return self._scalar(err)
            def fit(self, x):
                self.opt.zero_grad()
                self.objective(x).backward()
                self.opt.step()
        trainer = Trainer()
        trainer.fit(torch.randn(5, 3))
        """, "GT102", 7, holds="trainer.net.weight.grad is None")]),
    # GT445 through a method the loop calls every step (pytorch forums 47645)
    "parameter-built-in-per-step-method": (Shape("""
        class Net(nn.Module):
            def __init__(self, u):
                super().__init__()
                self.u = u
                self.fc = nn.Linear(4, 4)
            def set_weights(self):
                self.fc.weight = nn.Parameter(torch.sin(self.u))
            def forward(self, x):
                return self.fc(x)
        u = torch.randn(4, 4)
        model = Net(u)
        model.set_weights()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        before = model.fc.weight.detach().clone()
        for _ in range(2):
            loss = model(torch.randn(3, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT445", holds="not torch.equal(before, model.fc.weight)"), [Shape("""
        class Net(nn.Module):
            def __init__(self, u):
                super().__init__()
                self.u = u
                self.fc = nn.Linear(4, 4)
            def set_weights(self):
                self.fc.weight = nn.Parameter(torch.sin(self.u))
            def forward(self, x):
                return self.fc(x)
        u = torch.randn(4, 4, requires_grad=True)
        model = Net(u)
        opt = torch.optim.SGD([u], lr=0.1)
        for _ in range(2):
            model.set_weights()
            loss = model(torch.randn(3, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT445", 7, holds="u.grad is None"), Shape("""
        class Scaled(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)
                self.reset_scale()
            def reset_scale(self):
                self._make()
            def _make(self):
                self.scale = nn.Parameter(torch.ones(2))
            def forward(self, x):
                return self.fc(x) * self.scale
        def train(net, opt, batches):
            for x in batches:
                net.reset_scale()
                opt.zero_grad()
                net(x).sum().backward()
                opt.step()
        net = Scaled()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        train(net, opt, [torch.randn(3, 4) for _ in range(2)])
        """, "GT445", 9,
        holds="all(p is not net.scale for g in opt.param_groups for p in g['params'])")]),
    # GT302 on `self.<param>` registered in __init__ and written in place by forward
    "inplace-write-to-init-parameter-in-forward": (Shape("""
        class NormedLinear(nn.Module):
            def __init__(self, d_in, d_out):
                super().__init__()
                self.weight = nn.Parameter(torch.randn(d_out, d_in))
            def forward(self, x):
                with torch.no_grad():
                    self.weight /= self.weight.norm(dim=1, keepdim=True)
                return x @ self.weight.t()
        model = NormedLinear(4, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loss = model(torch.randn(3, 4)).pow(2).mean()
        loss.backward()
        opt.step()
        """, "GT302", holds="model.weight.grad is not None"), [Shape("""
        class Gate(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.fc = nn.Linear(d, d)
                self.scale = nn.Parameter(torch.ones(d))
            def _bounded(self):
                self.scale.clamp_(min=0.0)
                return self.scale
            def forward(self, x):
                return self.fc(x) * self._bounded()
        gate = Gate(4)
        gate(torch.randn(2, 4)).sum().backward()
        """, "GT302", 7, (RuntimeError, "leaf Variable that requires grad")), Shape("""
        class Memory(nn.Module):
            def __init__(self, n, d):
                super().__init__()
                self.slots = nn.Parameter(torch.zeros(n, d))
            def forward(self, x):
                self.slots[0] = x.mean(0)
                return x @ self.slots.t()
        mem = Memory(3, 4)
        opt = torch.optim.Adam(mem.parameters(), lr=0.01)
        mem(torch.randn(2, 4)).sum().backward()
        """, "GT302", 6, (RuntimeError, "view of a leaf Variable"))]),
    # GT302 in a helper given a Parameter, through a loop over a list of modules
    "helper-writes-passed-parameter": (Shape("""
        class Block(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.kernel = nn.Parameter(torch.zeros(d, d))
            def forward(self, x):
                return x @ self.kernel
        def fill_identity(t):
            t.copy_(torch.eye(t.shape[0]))
        blocks = [Block(3), Block(3)]
        with torch.no_grad():
            for b in blocks:
                fill_identity(b.kernel)
        model = nn.Sequential(*blocks)
        model(torch.randn(2, 3)).sum().backward()
        """, "GT302", holds="torch.equal(blocks[0].kernel, torch.eye(3))"), [Shape("""
        class Block(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.kernel = nn.Parameter(torch.zeros(d, d))
            def forward(self, x):
                return x @ self.kernel
        def fill_identity(t):
            t.copy_(torch.eye(t.shape[0]))
        blocks = (Block(3), Block(3))
        for b in blocks:
            fill_identity(b.kernel)
        model = nn.Sequential(*blocks)
        model(torch.randn(2, 3)).sum().backward()
        """, "GT302", 8, (RuntimeError, "leaf Variable that requires grad")), Shape("""
        class Gain(nn.Module):
            def __init__(self):
                super().__init__()
                self.g = nn.Parameter(torch.ones(4))
            def forward(self, x):
                return x * self.g
        def halve(v, k):
            v[:k] = 0.5
        model = Gain()
        halve(model.g, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model(torch.randn(2, 4)).sum().backward()
        """, "GT302", 8, (RuntimeError, "view of a leaf Variable"))]),
    # GT107 through `self.<attr>` that another method stores detached
    "attribute-stored-cut-by-another-method": (Shape("""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Linear(4, 4)
                self.feat = None
            def forward(self, x):
                h = self.enc(x)
                if self.training:
                    self.feat = h
                else:
                    self.feat = h.detach()
                return h
            def aux_loss(self):
                return self.feat.pow(2).mean()
        model = Model()
        model(torch.randn(2, 4))
        model.aux_loss().backward()
        """, "GT107", holds="model.enc.weight.grad is not None"), [Shape("""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Linear(4, 4)
                self.feat = None
            def forward(self, x):
                h = self.enc(x)
                self.feat = h.detach()
                return h
            def aux_loss(self):
                return self.feat.pow(2).mean()
        model = Model()
        model(torch.randn(2, 4))
        model.aux_loss().backward()
        """, "GT107", 8, (RuntimeError, "does not require grad")), Shape("""
        class Extractor(nn.Module):
            def __init__(self, body):
                super().__init__()
                self.body = body
                self.latents = None
                body[0].register_forward_hook(self._keep)
            def _keep(self, module, inputs, output):
                self.latents = output.clone().detach()
            def forward(self, x):
                return self.body(x)
            def latent_loss(self, target):
                return F.mse_loss(self.latents, target)
        ext = Extractor(nn.Sequential(nn.Linear(4, 4), nn.ReLU()))
        ext(torch.randn(2, 4))
        ext.latent_loss(torch.zeros(2, 4)).backward()
        """, "GT107", 8, (RuntimeError, "does not require grad"))]),
    # GT104/GT107 in a method whose result the caller backpropagates (distiller#234)
    "backpropagated-return-judged-as-loss": (Shape("""
        class Distill:
            def __init__(self, student, teacher, w_hard=0.5, w_soft=0.5):
                self.student, self.teacher = student, teacher
                self.w_hard, self.w_soft = w_hard, w_soft
            def run(self, x):
                with torch.no_grad():
                    self.soft_t = F.softmax(self.teacher(x), dim=1)
                self.logits = self.student(x)
                return self.logits
            def combine(self, hard_loss):
                soft = F.kl_div(F.log_softmax(self.logits, dim=1), self.soft_t.detach(),
                                reduction="batchmean")
                return self.w_hard * hard_loss + self.w_soft * soft
        student, teacher = nn.Linear(4, 3), nn.Linear(4, 3)
        kd = Distill(student, teacher)
        x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
        total = kd.combine(F.cross_entropy(kd.run(x), y))
        total.backward()
        """, "GT10", holds="student.weight.grad is not None"), [Shape("""
        class Distill:
            def __init__(self, student, teacher, w_hard=0.5, w_soft=0.5):
                self.student, self.teacher = student, teacher
                self.w_hard, self.w_soft = w_hard, w_soft
            def run(self, x):
                self.soft_t = F.softmax(self.teacher(x), dim=1).detach()
                out = self.student(x)
                self.logits = out.new_tensor(out, requires_grad=True)
                return out
            def combine(self, hard_loss):
                soft = F.kl_div(F.log_softmax(self.logits, dim=1), self.soft_t,
                                reduction="batchmean")
                return self.w_hard * hard_loss + self.w_soft * soft
        student, teacher = nn.Linear(4, 3), nn.Linear(4, 3)
        kd = Distill(student, teacher)
        x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
        total = kd.combine(F.cross_entropy(kd.run(x), y))
        total.backward()
        """, "GT104", 8, holds="kd.logits.grad is not None"), Shape("""
        class Fit:
            def __init__(self):
                self.net = nn.Linear(3, 1)
            def objective(self, x, y):
                pred = self.net(x).detach()
                loss = ((pred - y) ** 2).mean()
                return loss
        fit = Fit()
        fit.objective(torch.randn(4, 3), torch.randn(4, 1)).backward()
        """, "GT107", 5, (RuntimeError, "does not require grad"))]),
    # GT108 through a module call whose forward rounds its output
    "module-forward-cuts-its-output": (Shape("""
        class CountNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(6, 1)
            def forward(self, x):
                return self.fc(x)
            def predict(self, x):
                return torch.round(self.forward(x))
        model = CountNet()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x, y = torch.randn(8, 6), torch.randint(0, 5, (8, 1)).float()
        for _ in range(2):
            loss = F.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        counts = model.predict(x)
        """, "GT10", holds="model.fc.weight.grad.abs().sum() > 0"), [Shape("""
        class CountNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(6, 1)
            def forward(self, x):
                return self.fc(x).round()
        model = CountNet()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x, y = torch.randn(8, 6), torch.randint(0, 5, (8, 1)).float()
        for _ in range(2):
            loss = F.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT108", 6, holds="model.fc.weight.grad.abs().sum() == 0"), Shape("""
        class SignHead(nn.Module):
            def forward(self, z):
                return torch.sign(z)
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 2)
                self.head = SignHead()
            def forward(self, x):
                return self.head(self.body(x))
        net = Net()
        opt = torch.optim.Adam(net.parameters(), lr=0.01)
        loss = F.l1_loss(net(torch.randn(5, 4)), torch.ones(5, 2))
        loss.backward()
        opt.step()
        """, "GT108", 3, holds="net.body.weight.grad.abs().sum() == 0")]),
    # GT114: NumPy reads a Parameter that requires grad (EdgeML Bonsai)
    "numpy-of-trainable-parameter": (Shape("""
        class Bonsai(nn.Module):
            def __init__(self):
                super().__init__()
                self.W = nn.Parameter(torch.randn(3, 4))
                self.mask = nn.Parameter(torch.ones(3, 4), requires_grad=False)
            def forward(self, x):
                return x @ (self.W * self.mask).t()
        class Trainer:
            def __init__(self, model):
                self.model = model
            def prune(self):
                keep = np.abs(self.model.W.detach().numpy()) > 0.5
                self.model.mask.data = torch.from_numpy(np.copy(self.model.mask) * keep)
        trainer = Trainer(Bonsai())
        trainer.prune()
        trainer.model(torch.randn(2, 4)).sum().backward()
        """, "GT114", holds="trainer.model.W.grad is not None"), [Shape("""
        class Bonsai(nn.Module):
            def __init__(self):
                super().__init__()
                self.W = nn.Parameter(torch.randn(3, 4))
            def forward(self, x):
                return x @ self.W.t()
        class Trainer:
            def __init__(self, model):
                self.model = model
            def prune(self):
                w = np.copy(self.model.W)
                w[np.abs(w) < 0.5] = 0.0
                self.model.W.data = torch.from_numpy(w)
        trainer = Trainer(Bonsai())
        trainer.prune()
        """, "GT114", 11, (RuntimeError, "requires grad")), Shape("""
        class Codebook(nn.Module):
            def __init__(self, n, d):
                super().__init__()
                self.embed = nn.Parameter(torch.randn(n, d))
            def forward(self, i):
                return self.embed[i]
        books = [Codebook(4, 2), Codebook(4, 2)]
        for book in books:
            print(book.embed.numpy().mean())
        """, "GT114", 9, (RuntimeError, "requires grad"))]),
    # GT419: a module handed to an optimizer instead of its parameters (geotorch#7)
    "module-given-to-optimizer": (Shape("""
        class Trainer:
            def __init__(self, model, scale):
                self.model = model
                self.opt = torch.optim.Adam([{"params": self.model.parameters()},
                                             {"params": [scale]}], lr=0.1)
        scale = torch.ones(1, requires_grad=True)
        trainer = Trainer(nn.Linear(4, 4), scale)
        """, "GT419", holds="len(trainer.opt.param_groups) == 2"), [Shape("""
        class Trainer:
            def __init__(self, model, scale):
                self.model = model
                self.scale = scale
            def configure(self):
                return torch.optim.Adam([{"params": [self.model]},
                                         {"params": [self.scale]}], lr=0.1)
        scale = torch.ones(1, requires_grad=True)
        opt = Trainer(nn.Linear(4, 4), scale).configure()
        """, "GT419", 6, (TypeError, "can only optimize Tensors")), Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 1)
            def forward(self, x):
                return self.fc(x)
        net = Net()
        optimizer = torch.optim.SGD(net, lr=0.01)
        """, "GT419", 8, (TypeError, "not iterable"))]),
}


# more silent look-alikes, found on unseen code (precision gate)
LOOK_ALIKES: dict[str, Shape] = {
    # stable-baselines3 SAC: a learnable log-alpha made from a number parsed from a config
    # string, stored on self and read by the training method (not a cut of the graph)
    "sac-log-alpha-from-config-string": Shape("""
        class SAC:
            def __init__(self, ent_coef="auto_0.1"):
                self.ent_coef = ent_coef
                self.actor = nn.Linear(3, 2)
                self.log_ent_coef = None
                self._setup_model()
            def _setup_model(self):
                init_value = 1.0
                if "_" in self.ent_coef:
                    init_value = float(self.ent_coef.split("_")[1])
                self.log_ent_coef = torch.log(torch.ones(1) * init_value).requires_grad_(True)
                self.opt = torch.optim.Adam([self.log_ent_coef], lr=1e-3)
            def train(self, obs):
                log_prob = F.log_softmax(self.actor(obs), dim=-1)[:, 0]
                ent_coef_loss = -(self.log_ent_coef * (log_prob - 1.0).detach()).mean()
                self.opt.zero_grad()
                ent_coef_loss.backward()
                self.opt.step()
        agent = SAC()
        agent.train(torch.randn(4, 3))
        """, "GT10", holds="agent.log_ent_coef.grad is not None"),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(LOOK_ALIKES))
def test_more_look_alikes_are_silent(name: str) -> None:
    judge(PRELUDE, LOOK_ALIKES[name])


@pytest.mark.parametrize("name,i", [(n, i) for n in sorted(SHAPES)
                                    for i in range(len(SHAPES[n][1]))])
def test_buggy_twin_is_reported(name: str, i: int) -> None:
    judge(PRELUDE, SHAPES[name][1][i])


def test_every_shape_has_two_twins() -> None:
    assert all(len(bads) >= 2 for _, bads in SHAPES.values())


KINDS_SRC = """
import torch
import torch.nn as nn

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(2))

class Holder:
    def __init__(self, model, scale=2.0):
        self.model = model
        self.scale = scale

blocks = [Block(), Block()]
for b in blocks:
    b.w
mixed = [Block(), nn.Linear(2, 2)]
for m in mixed:
    m.weight
h = Holder(Block())
h.model.w
"""


def _kinds_at() -> dict[str, object]:
    import ast

    from gradtrace.lint.context import Context
    from gradtrace.lint.names import Imports

    tree = ast.parse(KINDS_SRC)
    imports = Imports()
    for s in tree.body:
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            imports.add(s)
    ctx = Context("m.py", KINDS_SRC, tree, imports)
    out = {}
    for s in ast.walk(tree):
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Attribute):
            out[ast.unparse(s.value)] = ctx.analysis.kind_in(s.value, tree, s.lineno)
            out[ast.unparse(s.value.value)] = ctx.analysis.kind_in(s.value.value, tree, s.lineno)
    return out


def test_kind_of_loop_variable_and_constructor_field() -> None:
    k = _kinds_at()
    assert (k["b"].what, k["b"].cls) == ("module", "Block")  # type: ignore[union-attr]
    assert k["b.w"].what == "parameter"  # type: ignore[union-attr]
    assert k["m"] is None  # elements of two kinds: unknown
    assert (k["h.model"].what, k["h.model"].cls) == ("module", "Block")  # type: ignore[union-attr]
    assert k["h.model.w"].what == "parameter"  # type: ignore[union-attr]
