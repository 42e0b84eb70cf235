"""Readings of docs/triage/static23b.md, written from each mechanism's sentence before reading
the code of the case it came from: buggy twins in several shapes (a script, a method of a
trainer class, a helper one call away, a Lightning module, another spelling of the API) that
real torch shows wrong, and correct look-alikes of the same shape that run; the checker reports
the first and stays silent on the second."""
from __future__ import annotations

from textwrap import dedent

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore")
'''

EMA = '''
class EMA:
    def __init__(self, params, decay=0.9):
        self.shadow = [p.detach().clone() for p in params]
        self.decay = decay
    @torch.no_grad()
    def update(self, params):
        for s, p in zip(self.shadow, params):
            s.mul_(self.decay).add_(p, alpha=1 - self.decay)
    @torch.no_grad()
    def copy_to(self, params):
        for s, p in zip(self.shadow, params):
            p.data.copy_(s)
'''

LERP_EMA = '''
class Averager:
    def __init__(self, params, beta=0.5):
        self.avg = [p.detach().clone() for p in params]
        self.beta = beta
    def step(self, params):
        for p, a in zip(params, self.avg):
            a.lerp_(p.detach(), 1 - self.beta)
    def apply(self, params):
        with torch.no_grad():
            for p, a in zip(params, self.avg):
                p.copy_(a)
'''

SCALED = '''
class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.raw_scale = nn.Parameter(torch.zeros(1))
        self.bias = nn.Parameter(torch.zeros(1))
    @property
    def scale(self):
        return F.softplus(self.raw_scale)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT469, mechanism: a freeze that sets `requires_grad` on a copy of the parameter (a
    # state_dict() value, `.data`, `.detach()`, a comprehension of those): the parameter
    # keeps training. Script loop over state_dict().items(); look-alike: named_parameters()
    "freeze-through-state-dict-items": (Shape("""
        model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 1))
        for name, p in model.named_parameters():
            if name.startswith("0."):
                p.requires_grad = False
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        w0 = model[0].weight.detach().clone()
        model(torch.randn(8, 4)).pow(2).mean().backward()
        opt.step()
        """, "GT469", holds="torch.equal(w0, model[0].weight)"), Shape("""
        model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 1))
        for name, p in model.state_dict().items():
            if name.startswith("0."):
                p.requires_grad = False
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        w0 = model[0].weight.detach().clone()
        model(torch.randn(8, 4)).pow(2).mean().backward()
        opt.step()
        """, "GT469", 4, holds="not torch.equal(w0, model[0].weight)")),
    # GT469, a trainer method indexing a bound state dict; look-alike: keep_vars=True
    "freeze-through-bound-state-dict-in-trainer": (Shape("""
        class Trainer:
            def __init__(self):
                self.model = nn.ModuleDict({"enc": nn.Linear(4, 4), "head": nn.Linear(4, 1)})
            def freeze_encoder(self):
                sd = self.model.state_dict(keep_vars=True)
                for k in sd:
                    if k.startswith("enc."):
                        sd[k].requires_grad_(False)
        t = Trainer()
        t.freeze_encoder()
        """, "GT469", holds="not t.model['enc'].weight.requires_grad"), Shape("""
        class Trainer:
            def __init__(self):
                self.model = nn.ModuleDict({"enc": nn.Linear(4, 4), "head": nn.Linear(4, 1)})
            def freeze_encoder(self):
                sd = self.model.state_dict()
                for k in sd:
                    if k.startswith("enc."):
                        sd[k].requires_grad_(False)
        t = Trainer()
        t.freeze_encoder()
        """, "GT469", 8, holds="all(p.requires_grad for p in t.model['enc'].parameters())")),
    # GT469, a helper one call away freezing `.data`; look-alike: the parameter itself
    "freeze-data-in-helper": (Shape("""
        def freeze(module):
            for p in module.parameters():
                p.requires_grad = False
        net = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 1))
        freeze(net[0])
        """, "GT469", holds="not net[0].weight.requires_grad"), Shape("""
        def freeze(module):
            for p in module.parameters():
                p.data.requires_grad = False
        net = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 1))
        freeze(net[0])
        """, "GT469", 3, holds="net[0].weight.requires_grad")),
    # GT469, another spelling: a loop over a comprehension of detached copies; look-alike:
    # a detached input made a new leaf (`x = img.detach().requires_grad_()`)
    "freeze-list-of-detached-copies": (Shape("""
        net = nn.Linear(4, 1)
        img = torch.randn(2, 4) * 2
        x = img.detach().requires_grad_()
        net(x).sum().backward()
        for p in net.parameters():
            p.requires_grad_(False)
        """, "GT469", holds="x.grad is not None and not net.weight.requires_grad"), Shape("""
        net = nn.Linear(4, 1)
        img = torch.randn(2, 4) * 2
        x = img.detach().requires_grad_()
        net(x).sum().backward()
        for p in [q.detach() for q in net.parameters()]:
            p.requires_grad_(False)
        """, "GT469", 6, holds="net.weight.requires_grad")),
    # GT469, a Lightning module freezing its backbone in __init__ through state_dict values;
    # look-alike: requires_grad_(False) on the module
    "freeze-state-dict-values-in-lightning-init": (Shape("""
        import lightning as L
        class Probe(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.backbone = nn.Linear(4, 4)
                self.head = nn.Linear(4, 1)
                self.backbone.requires_grad_(False)
            def training_step(self, batch, idx):
                return self.head(self.backbone(batch)).mean()
        m = Probe()
        m.training_step(torch.randn(3, 4), 0).backward()
        """, "GT469", holds="m.backbone.weight.grad is None"), Shape("""
        import lightning as L
        class Probe(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.backbone = nn.Linear(4, 4)
                self.head = nn.Linear(4, 1)
                for v in self.backbone.state_dict().values():
                    v.requires_grad = False
            def training_step(self, batch, idx):
                return self.head(self.backbone(batch)).mean()
        m = Probe()
        m.training_step(torch.randn(3, 4), 0).backward()
        """, "GT469", 8, holds="m.backbone.weight.grad is not None")),

    # GT769, mechanism: a clamp's upper bound `1 - eps` is exactly 1.0 in the tensor's dtype,
    # so a saturated probability stays 1.0 and log(1 - p) is -inf. Script, hand-written BCE;
    # look-alike: eps = 1e-7 (representable in float32)
    "bce-clamp-1e-8-script": (Shape("""
        lin = nn.Linear(1, 1)
        with torch.no_grad():
            lin.weight.fill_(50.0)
        x, y = torch.tensor([[1.0], [-0.1]]), torch.tensor([[1.0], [0.0]])
        p = torch.sigmoid(lin(x)).clamp(1e-7, 1 - 1e-7)
        loss = -(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean()
        loss.backward()
        """, "GT769", holds="torch.isfinite(lin.weight.grad).all()"), Shape("""
        lin = nn.Linear(1, 1)
        with torch.no_grad():
            lin.weight.fill_(50.0)
        x, y = torch.tensor([[1.0], [-0.1]]), torch.tensor([[1.0], [0.0]])
        p = torch.sigmoid(lin(x)).clamp(1e-8, 1 - 1e-8)
        loss = -(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean()
        loss.backward()
        """, "GT769", 6, holds="torch.isnan(loss) and torch.isnan(lin.weight.grad).all()")),
    # GT769, a loss class whose eps is a constructor default kept on self, log1p(-p);
    # look-alike: the same with 1e-6, representable in float32
    "loss-class-self-eps-log1p": (Shape("""
        class SurvivalLoss(nn.Module):
            def __init__(self, eps=1e-6):
                super().__init__()
                self.eps = eps
            def forward(self, p):
                p = p.clamp(min=self.eps, max=1.0 - self.eps)
                return -torch.log1p(-p).mean()
        lin = nn.Linear(1, 1)
        with torch.no_grad():
            lin.weight.fill_(50.0)
        SurvivalLoss()(torch.sigmoid(lin(torch.ones(2, 1)))).backward()
        """, "GT769", holds="torch.isfinite(lin.weight.grad).all()"), Shape("""
        class SurvivalLoss(nn.Module):
            def __init__(self, eps=1e-10):
                super().__init__()
                self.eps = eps
            def forward(self, p):
                p = p.clamp(min=self.eps, max=1.0 - self.eps)
                return -torch.log1p(-p).mean()
        lin = nn.Linear(1, 1)
        with torch.no_grad():
            lin.weight.fill_(50.0)
        SurvivalLoss()(torch.sigmoid(lin(torch.ones(2, 1)))).backward()
        """, "GT769", 7, holds="not torch.isfinite(lin.weight.grad).all()")),
    # GT769, a helper one call away with an argument default, a view between the clamp and
    # the log; look-alike: the epsilon inside the log
    "helper-eps-default-view-between": (Shape("""
        def neg_log_miss(p, eps=1e-9):
            p = torch.clamp(p, eps, 1 - eps)
            p = p.unsqueeze(1)
            return -torch.log(1 - p + eps).mean()
        lin = nn.Linear(1, 1)
        with torch.no_grad():
            lin.weight.fill_(50.0)
        for step in range(2):
            loss = neg_log_miss(torch.sigmoid(lin(torch.ones(2, 1))))
            loss.backward()
        """, "GT769", holds="torch.isfinite(loss)"), Shape("""
        def neg_log_miss(p, eps=1e-9):
            p = torch.clamp(p, eps, 1 - eps)
            p = p.unsqueeze(1)
            return -torch.log(1 - p).mean()
        lin = nn.Linear(1, 1)
        with torch.no_grad():
            lin.weight.fill_(50.0)
        for step in range(2):
            loss = neg_log_miss(torch.sigmoid(lin(torch.ones(2, 1))))
            loss.backward()
        """, "GT769", 4, holds="torch.isinf(loss)")),
    # GT769, bfloat16 (1 - 1e-4 is 1.0 there); look-alike: the clamp on a float32 upcast
    "bfloat16-clamp-max": (Shape("""
        lin = nn.Linear(1, 1).to(torch.bfloat16)
        with torch.no_grad():
            lin.weight.fill_(50.0)
        probs = torch.sigmoid(lin(torch.ones(2, 1, dtype=torch.bfloat16)))
        loss = (1 - torch.exp(torch.log1p(-probs.float().clamp(max=1 - 1e-4)))).mean()
        loss.backward()
        """, "GT769", holds="torch.isfinite(lin.weight.grad).all()"), Shape("""
        lin = nn.Linear(1, 1).to(torch.bfloat16)
        with torch.no_grad():
            lin.weight.fill_(50.0)
        probs = torch.sigmoid(lin(torch.ones(2, 1, dtype=torch.bfloat16)))
        loss = (1 - torch.exp(torch.log1p(-probs.clamp(max=1 - 1e-4)))).mean()
        loss.backward()
        """, "GT769", 5, holds="not torch.isfinite(lin.weight.grad).all()")),

    # GT220, mechanism: a module an optimizer steps runs only under no_grad (in its caller):
    # it never gets a gradient. A trainer, direct call, optimizer over two modules' lists;
    # look-alike: only the target branch under no_grad
    "backbone-under-no-grad-in-trainer": (Shape("""
        class Trainer:
            def __init__(self):
                self.backbone = nn.Linear(4, 4)
                self.head = nn.Linear(4, 1)
                self.opt = torch.optim.SGD(list(self.backbone.parameters())
                                           + list(self.head.parameters()), lr=0.1)
            def step(self, x, x2, y):
                feats = self.backbone(x)
                with torch.no_grad():
                    target = self.head(self.backbone(x2)) + y
                loss = F.mse_loss(self.head(feats), target)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
        t = Trainer()
        t.step(torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 1))
        """, "GT220", holds="t.backbone.weight.grad is not None"), Shape("""
        class Trainer:
            def __init__(self):
                self.backbone = nn.Linear(4, 4)
                self.head = nn.Linear(4, 1)
                self.opt = torch.optim.SGD(list(self.backbone.parameters())
                                           + list(self.head.parameters()), lr=0.1)
            def step(self, x, y):
                with torch.no_grad():
                    feats = self.backbone(x)
                loss = F.mse_loss(self.head(feats), y)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
        t = Trainer()
        t.step(torch.randn(3, 4), torch.randn(3, 1))
        """, "GT220", 9, holds="t.backbone.weight.grad is None")),
    # GT220, through a method of the class that returns the module's output, its two calls
    # under one no_grad block; look-alike: the first call with grad
    "encoder-through-helper-method": (Shape("""
        class Agent:
            def __init__(self):
                self.encoder = nn.Linear(4, 4)
                self.critic = nn.Linear(4, 1)
                self.encoder_opt = torch.optim.Adam(self.encoder.parameters())
                self.critic_opt = torch.optim.Adam(self.critic.parameters())
            def encode(self, obs):
                return torch.tanh(self.encoder(obs))
            def update(self, obs, next_obs, r):
                obs = self.encode(obs)
                with torch.no_grad():
                    next_obs = self.encode(next_obs)
                loss = F.mse_loss(self.critic(obs), r + self.critic(next_obs))
                self.encoder_opt.zero_grad()
                self.critic_opt.zero_grad()
                loss.backward()
                self.encoder_opt.step()
                self.critic_opt.step()
        a = Agent()
        a.update(torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 1))
        """, "GT220", holds="a.encoder.weight.grad is not None"), Shape("""
        class Agent:
            def __init__(self):
                self.encoder = nn.Linear(4, 4)
                self.critic = nn.Linear(4, 1)
                self.encoder_opt = torch.optim.Adam(self.encoder.parameters())
                self.critic_opt = torch.optim.Adam(self.critic.parameters())
            def encode(self, obs):
                return torch.tanh(self.encoder(obs))
            def update(self, obs, next_obs, r):
                with torch.no_grad():
                    obs = self.encode(obs)
                    next_obs = self.encode(next_obs)
                loss = F.mse_loss(self.critic(obs), r + self.critic(next_obs))
                self.encoder_opt.zero_grad()
                self.critic_opt.zero_grad()
                loss.backward()
                self.encoder_opt.step()
                self.critic_opt.step()
        a = Agent()
        a.update(torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 1))
        """, "GT220", 11, holds="a.encoder.weight.grad is None")),
    # GT220, another spelling: a method decorated with @torch.no_grad() runs the module;
    # look-alike: the decorated method only logs, the step runs the module with grad
    "decorated-embed-method": (Shape("""
        class Learner:
            def __init__(self):
                self.embed = nn.Linear(4, 4)
                self.cls = nn.Linear(4, 2)
                self.opt = torch.optim.SGD(list(self.embed.parameters())
                                           + list(self.cls.parameters()), lr=0.1)
            @torch.no_grad()
            def norms(self, x):
                return self.embed(x).norm(dim=1)
            def train_step(self, x, y):
                loss = F.cross_entropy(self.cls(self.embed(x)), y)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                return self.norms(x)
        l = Learner()
        l.train_step(torch.randn(3, 4), torch.tensor([0, 1, 0]))
        """, "GT220", holds="l.embed.weight.grad is not None"), Shape("""
        class Learner:
            def __init__(self):
                self.embed = nn.Linear(4, 4)
                self.cls = nn.Linear(4, 2)
                self.opt = torch.optim.SGD(list(self.embed.parameters())
                                           + list(self.cls.parameters()), lr=0.1)
            @torch.no_grad()
            def features(self, x):
                return self.embed(x)
            def train_step(self, x, y):
                loss = F.cross_entropy(self.cls(self.features(x)), y)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
        l = Learner()
        l.train_step(torch.randn(3, 4), torch.tensor([0, 1, 0]))
        """, "GT220", 7, holds="l.embed.weight.grad is None")),  # at the decorator (session 30)
    # GT220, a Lightning module whose configure_optimizers returns the encoder's optimizer;
    # look-alike: the encoder runs with grad in training_step
    "lightning-configure-optimizers": (Shape("""
        import lightning as L
        class Contrastive(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Linear(4, 4)
                self.proj = nn.Linear(4, 2)
            def training_step(self, batch, idx):
                z = self.encoder(batch)
                return self.proj(z).pow(2).mean()
            def configure_optimizers(self):
                return torch.optim.Adam(self.encoder.parameters(), lr=1e-3)
        m = Contrastive()
        m.training_step(torch.randn(3, 4), 0).backward()
        """, "GT220", holds="m.encoder.weight.grad is not None"), Shape("""
        import lightning as L
        class Contrastive(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Linear(4, 4)
                self.proj = nn.Linear(4, 2)
            def training_step(self, batch, idx):
                with torch.no_grad():
                    z = self.encoder(batch)
                return self.proj(z).pow(2).mean()
            def configure_optimizers(self):
                return torch.optim.Adam(self.encoder.parameters(), lr=1e-3)
        m = Contrastive()
        m.training_step(torch.randn(3, 4), 0).backward()
        """, "GT220", 9, holds="m.encoder.weight.grad is None")),

    # GT468, mechanism: an average of the weights is built from the model and applied, but
    # its update method is never called: it keeps the initial weights. Script; look-alike:
    # the update after each optimizer step
    "ema-never-updated-script": (Shape(EMA + dedent("""
        model = nn.Linear(4, 1)
        w0 = model.weight.detach().clone()
        ema = EMA(model.parameters())
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        for i in range(5):
            loss = (model(torch.randn(8, 4)) - 3).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            ema.update(model.parameters())
        ema.copy_to(model.parameters())
        """), "GT468", holds="not torch.equal(model.weight, w0)"), Shape(EMA + dedent("""
        model = nn.Linear(4, 1)
        w0 = model.weight.detach().clone()
        ema = EMA(model.parameters())
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        for i in range(5):
            loss = (model(torch.randn(8, 4)) - 3).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        ema.copy_to(model.parameters())
        """), "GT468", 22, holds="torch.equal(model.weight, w0)")),
    # GT468, a trainer holding the average on self; look-alike: train_step updates it
    "ema-on-self-of-trainer": (Shape(EMA + dedent("""
        class Trainer:
            def __init__(self):
                self.model = nn.Linear(4, 1)
                self.ema = EMA(self.model.parameters())
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.5)
            def train_step(self, x):
                loss = (self.model(x) - 3).pow(2).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                self.ema.update(self.model.parameters())
            def export(self):
                self.ema.copy_to(self.model.parameters())
        t = Trainer()
        w0 = t.model.weight.detach().clone()
        t.train_step(torch.randn(8, 4))
        t.export()
        """), "GT468", holds="not torch.equal(t.model.weight, w0)"), Shape(EMA + dedent("""
        class Trainer:
            def __init__(self):
                self.model = nn.Linear(4, 1)
                self.ema = EMA(self.model.parameters())
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.5)
            def train_step(self, x):
                loss = (self.model(x) - 3).pow(2).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
            def export(self):
                self.ema.copy_to(self.model.parameters())
        t = Trainer()
        w0 = t.model.weight.detach().clone()
        t.train_step(torch.randn(8, 4))
        t.export()
        """), "GT468", 23, holds="torch.equal(t.model.weight, w0)")),
    # GT468, another spelling (`step` with lerp_) inside a training function; look-alike:
    # stepped under the accumulation condition
    "averager-step-in-training-function": (Shape(LERP_EMA + dedent("""
        def fit(model, batches, accumulate=1):
            avg = Averager(model.parameters())
            opt = torch.optim.SGD(model.parameters(), lr=0.5)
            for i, x in enumerate(batches):
                (model(x) - 3).pow(2).mean().backward()
                if (i + 1) % accumulate == 0:
                    opt.step()
                    opt.zero_grad()
                    avg.step(model.parameters())
            avg.apply(model.parameters())
            return model
        model = nn.Linear(4, 1)
        w0 = model.weight.detach().clone()
        fit(model, [torch.randn(8, 4) for _ in range(3)])
        """), "GT468", holds="not torch.equal(model.weight, w0)"), Shape(LERP_EMA + dedent("""
        def fit(model, batches, accumulate=1):
            avg = Averager(model.parameters())
            opt = torch.optim.SGD(model.parameters(), lr=0.5)
            for i, x in enumerate(batches):
                (model(x) - 3).pow(2).mean().backward()
                if (i + 1) % accumulate == 0:
                    opt.step()
                    opt.zero_grad()
            avg.apply(model.parameters())
            return model
        model = nn.Linear(4, 1)
        w0 = model.weight.detach().clone()
        fit(model, [torch.randn(8, 4) for _ in range(3)])
        """), "GT468", 20, holds="torch.equal(model.weight, w0)")),
    # GT467, mechanism: a parameter is excluded (set difference, `is not`, `not in` a set)
    # by identity against a tensor computed from it (a property, `.data`, `.detach()`):
    # nothing is excluded. Script with a property; look-alike: the raw parameter excluded
    "set-difference-with-property": (Shape(SCALED + dedent("""
        k = Scaled()
        opt = torch.optim.Adam(list(set(k.parameters()) - {k.raw_scale}), lr=0.1)
        """), "GT467", holds="len(opt.param_groups[0]['params']) == 1"), Shape(SCALED + dedent("""
        k = Scaled()
        opt = torch.optim.Adam(list(set(k.parameters()) - {k.scale}), lr=0.1)
        """), "GT467", 11, holds="len(opt.param_groups[0]['params']) == 2")),
    # GT467, a trainer's comprehension with `is not` a property; look-alike: the raw one
    "comprehension-is-not-property-in-trainer": (Shape(SCALED + dedent("""
        class Trainer:
            def __init__(self):
                self.k = Scaled()
                self.opt = torch.optim.SGD(
                    [p for p in self.k.parameters() if p is not self.k.raw_scale], lr=0.1)
        t = Trainer()
        """), "GT467", holds="len(t.opt.param_groups[0]['params']) == 1"), Shape(SCALED + dedent("""
        class Trainer:
            def __init__(self):
                self.k = Scaled()
                self.opt = torch.optim.SGD(
                    [p for p in self.k.parameters() if p is not self.k.scale], lr=0.1)
        t = Trainer()
        """), "GT467", 14, holds="len(t.opt.param_groups[0]['params']) == 2")),
    # GT467, a helper one call away: `not in` a set of `.data` copies; look-alike: the
    # parameters themselves in the set
    "helper-not-in-set-of-data": (Shape("""
        def trainable(m):
            return [p for p in m.parameters() if p not in {m.weight}]
        net = nn.Linear(4, 2)
        params = trainable(net)
        """, "GT467", holds="len(params) == 1"), Shape("""
        def trainable(m):
            return [p for p in m.parameters() if p not in {m.weight.data}]
        net = nn.Linear(4, 2)
        params = trainable(net)
        """, "GT467", 2, holds="len(params) == 2")),
    # GT467, another spelling: named_parameters and `.detach()`; look-alike: by name
    "named-parameters-is-not-detached": (Shape("""
        net = nn.Linear(4, 2)
        fixed = [p for n, p in net.named_parameters() if n != "bias"]
        """, "GT467", holds="len(fixed) == 1"), Shape("""
        net = nn.Linear(4, 2)
        fixed = [p for n, p in net.named_parameters() if p is not net.bias.detach()]
        """, "GT467", 2, holds="len(fixed) == 2")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
