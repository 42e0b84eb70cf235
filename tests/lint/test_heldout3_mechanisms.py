"""Mechanisms behind held-out misses of session 7 (docs/triage/heldout3.md), each in spellings
other than the case it came from, run on real torch.

Same harness as test_heldout_shapes.py: a look-alike that must stay silent and run, buggy twins
(two or more spellings: a method, a helper function, a script, a subclass) that must be
reported on the given line and really fail on torch (any exception whose message matches), or
show the silent symptom (``holds``).
"""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _source

torch = pytest.importorskip("torch")

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    # GT415: a plain tensor assigned over a registered Parameter, or given to register_parameter
    "plain-value-over-parameter": (Shape("""
        class Mix(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.weights = nn.Parameter(torch.ones(n))
                self.register_parameter("gain", nn.Parameter(torch.ones(1)))
                self.register_parameter("bias", None)

            def forward(self, layers):
                weights = F.softmax(self.weights, dim=0)
                self.cache = self.weights * 2
                self.weights = nn.Parameter(self.weights.data.clone())
                self.weights = self.weights.float()
                return sum(w * h for w, h in zip(weights, layers)) * self.gain

        m = Mix(3)
        m([torch.randn(2, 4) for _ in range(3)]).sum().backward()
        """, "GT415", holds="m.gain.grad is not None"), [Shape("""
        class Temperature(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_parameter("temp", nn.Parameter(torch.tensor(1.0)))

            def clamp(self):
                self.temp = self.temp.clamp(min=0.05)

            def forward(self, logits):
                self.clamp()
                return logits / self.temp

        Temperature()(torch.randn(2, 3)).sum().backward()
        """, "GT415", 7, "cannot assign"), Shape("""
        def dct_filter(n):
            f = torch.zeros(n, n)
            f[0, 0] = 1.0
            return f * 0.5

        class DCT(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.register_parameter("weight", dct_filter(n))

        DCT(4)
        """, "GT415", 9, "cannot assign"), Shape("""
        class Gate(nn.Module):
            def __init__(self):
                super().__init__()
                self.alpha = nn.Parameter(torch.zeros(4))

            def forward(self, x):
                self.alpha = torch.sigmoid(self.alpha)
                return x * self.alpha

        Gate()(torch.randn(2, 4))
        """, "GT415", 7, "cannot assign")]),
    # GT416: a submodule or parameter assigned before super().__init__()
    "module-attribute-before-init": (Shape("""
        class Wrapper(nn.Module):
            def __init__(self, inner, scale=2.0):
                self.scale = scale
                self.tag = "wrapped"
                super().__init__()
                self.inner = inner

            def forward(self, x):
                return self.inner(x) * self.scale

        Wrapper(nn.Linear(3, 3))(torch.randn(2, 3)).sum().backward()
        """, "GT416"), [Shape("""
        class Base(nn.Module):
            def __init__(self, enc):
                super(Base, self).__init__()
                self.enc = enc

        class WithHead(Base):
            def __init__(self, enc, head):
                self.head = head
                super(WithHead, self).__init__(enc)

        WithHead(nn.Linear(3, 3), nn.Linear(3, 1))
        """, "GT416", 8, "cannot assign module"), Shape("""
        class Scaled(nn.Module):
            def __init__(self, n):
                self.gamma = nn.Parameter(torch.ones(n))
                nn.Module.__init__(self)

        Scaled(3)
        """, "GT416", 3, "cannot assign parameters"), Shape("""
        class Stats(nn.Module):
            def __init__(self, n):
                if n > 0:
                    self.register_buffer("mean", torch.zeros(n))
                super().__init__()

        Stats(3)
        """, "GT416", 4, "cannot assign buffer")]),
    # GT521: a tensor computed in __init__ from the module's own Parameter (or layer)
    "graph-built-in-init": (Shape("""
        class Kernel(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.log_scale = nn.Parameter(torch.zeros(d))
                self.d = self.log_scale.shape[0]
                self.scale_t = self.log_scale.view(1, d)
                self.mask = self.log_scale.new_ones(d)  # fresh and integer results: no graph
                self.order = self.log_scale.argsort()

            @property
            def scale(self):
                return torch.exp(self.log_scale)

            def forward(self, x):
                x = x[:, self.order] * self.mask
                return (x / self.scale).sum() + self.scale_t.sum() * self.d

        k = Kernel(3)
        opt = torch.optim.SGD(k.parameters(), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            k(torch.randn(4, 3)).backward()
            opt.step()
        """, "GT521"), [Shape("""
        class Rbf(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.raw = nn.Parameter(torch.ones(d))
                self.lengths = F.softplus(self.raw) + 1e-4

            def forward(self, x):
                return torch.exp(-(x / self.lengths).pow(2).sum(-1))

        model = Rbf(3)
        opt = torch.optim.Adam(model.parameters(), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            model(torch.randn(4, 3)).sum().backward()
            opt.step()
        """, "GT521", 5, "backward through the graph a second time"), Shape("""
        class Decoder(nn.Module):
            def __init__(self, n, d):
                super().__init__()
                self.pos = nn.Embedding(n, d)
                self.table = self.pos(torch.arange(n)) * 0.5
                self.out = nn.Linear(d, 1)

            def forward(self, x):
                return self.out(x + self.table).mean()

        net = Decoder(5, 4)
        for _ in range(2):
            net(torch.randn(5, 4)).backward()
        """, "GT521", 5, "backward through the graph a second time")]),
    # GT518: zero_grad + backward every pass of a loop, the step after the loop
    "step-outside-backward-loop": (Shape("""
        model = nn.Linear(4, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = [(torch.randn(3, 4), torch.randn(3, 2)) for _ in range(4)]
        steps = 0
        for epoch in range(2):
            optimizer.zero_grad()
            for x, y in loader:
                loss = F.mse_loss(model(x), y) / len(loader)
                loss.backward()
            optimizer.step()
            steps += 1
        """, "GT518", holds="steps == 2"), [Shape("""
        def fit(net, batches, opt, epochs=2):
            applied = []
            for _ in range(epochs):
                for x, y in batches:
                    net.zero_grad()
                    F.mse_loss(net(x), y).backward()
                    last = net.weight.grad.clone()
                opt.step()
                applied.append(last)
            return applied

        net = nn.Linear(4, 2)
        batches = [(torch.randn(3, 4), torch.randn(3, 2)) for _ in range(3)]
        applied = fit(net, batches, torch.optim.SGD(net.parameters(), lr=0.1))
        """, "GT518", 8, holds="torch.equal(applied[-1], net.weight.grad)"), Shape("""
        class Trainer:
            def __init__(self, model):
                self.model = model
                self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

            def train_epoch(self, loader):
                for x, y in loader:
                    self.optimizer.zero_grad()
                    loss = F.mse_loss(self.model(x), y)
                    loss.backward()
                self.optimizer.step()

        Trainer(nn.Linear(4, 2)).train_epoch([(torch.randn(3, 4), torch.randn(3, 2))] * 2)
        """, "GT518", 11)]),
    # GT519: the loss divided by N for accumulation, the step outside the `% N` branch
    "step-outside-accumulation-branch": (Shape("""
        model = nn.Linear(4, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        accum, steps = 2, 0
        for i in range(4):
            loss = F.mse_loss(model(torch.randn(3, 4)), torch.randn(3, 2)) / accum
            loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
                steps += 1
            if i % 2 == 0:
                print(loss.item())
        """, "GT519", holds="steps == 2"), [Shape("""
        def train(model, data, opt, grad_accum=2):
            n_steps = 0
            for it, (x, y) in enumerate(data):
                loss = F.mse_loss(model(x), y)
                loss = loss / grad_accum
                loss.backward()
                if (it + 1) % grad_accum == 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                opt.zero_grad()
                n_steps += 1
            return n_steps

        model = nn.Linear(4, 2)
        data = [(torch.randn(3, 4), torch.randn(3, 2)) for _ in range(4)]
        n = train(model, data, torch.optim.SGD(model.parameters(), lr=0.1))
        """, "GT519", 9, holds="n == 4"), Shape("""
        class Loop:
            def __init__(self, model, accumulate):
                self.model, self.accumulate = model, accumulate
                self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                self.micro = 0

            def run(self, batches):
                for x, y in batches:
                    (F.mse_loss(self.model(x), y) / self.accumulate).backward()
                    self.micro += 1
                    if self.micro % self.accumulate == 0:
                        self.micro = 0
                    if self.optimizer is not None:
                        self.optimizer.step()
                        self.optimizer.zero_grad()

        Loop(nn.Linear(4, 2), 2).run([(torch.randn(3, 4), torch.randn(3, 2))] * 4)
        """, "GT519", 14)]),
    # GT756: the log of a sigmoid (or of one minus it) instead of logsigmoid
    "log-of-sigmoid": (Shape("""
        class Bce(nn.Module):
            def forward(self, z, y):
                p = torch.sigmoid(z)
                return -(y * F.logsigmoid(z) + (1 - y) * torch.log(1 - p + 1e-7)).mean()

        w = torch.tensor([[200.0, -200.0]], requires_grad=True)
        Bce()(torch.randn(3, 2) @ w.t(), torch.ones(3, 1)).backward()
        """, "GT756", holds="not torch.isnan(w.grad).any()"), [Shape("""
        class FocalAlt(nn.Module):
            def forward(self, x, t):
                xt = x * (2 * t - 1)
                prob = (2 * xt + 1).sigmoid()
                return -(0.25 * prob.log()).sum()

        head = nn.Linear(2, 1)
        with torch.no_grad():
            head.weight.fill_(100.0)
        FocalAlt()(head(torch.ones(2, 2)), torch.zeros(2, 1)).backward()
        """, "GT756", 5, holds="torch.isnan(head.weight.grad).any()"), Shape("""
        net = nn.Sequential(nn.Linear(2, 1), nn.Sigmoid())
        with torch.no_grad():
            net[0].weight.fill_(30.0)
        x, y = torch.ones(4, 2), torch.zeros(4, 1)
        p = net(x)
        loss = -(y * torch.log(p + 1e-7) + (1 - y) * torch.log(1 - p)).mean()
        loss.backward()
        """, "GT756", 6, holds="torch.isnan(net[0].weight.grad).any()")]),
    # GT754 (widened): nan_to_num over an expression holding a log, through a name
    "nan-to-num-after-log": (Shape("""
        logits = torch.tensor([[0.0, -200.0]], requires_grad=True)
        pred, gt = torch.softmax(logits, 1), torch.tensor([[0.5, 0.5]])
        loss = (pred * torch.log(pred.clamp_min(1e-12) / gt)).nan_to_num(0).sum()
        loss.backward()
        """, "GT754", holds="not torch.isnan(logits.grad).any()"), [Shape("""
        def kl_term(pred, gt):
            kl = pred * torch.log(pred / gt) + gt - pred
            return torch.nan_to_num(kl, nan=0.0).mean()

        logits = torch.tensor([[0.0, -200.0]], requires_grad=True)
        kl_term(torch.softmax(logits, 1), torch.tensor([[0.5, 0.5]])).backward()
        """, "GT754", 2, holds="torch.isnan(logits.grad).any()"), Shape("""
        class Poisson(nn.Module):
            def forward(self, pred, target):
                term = target * torch.log(pred) - pred
                return -term.nan_to_num(0.0).sum()

        rates = torch.tensor([0.0, 1.0], requires_grad=True)
        Poisson()(rates * 1, torch.tensor([0.0, 2.0])).backward()
        """, "GT754", 3, holds="torch.isnan(rates.grad).any()")]),
    # GT302 (widened): a torch.nn layer's weight reached through an attribute chain
    # (`self.emb.weight`, `model.encoder.weight`) written in place with grad on
    "layer-weight-written-in-place": (Shape("""
        class Tagger(nn.Module):
            def __init__(self, init_emb, freeze=False):
                super().__init__()
                self.emb = nn.Embedding(10, 4)
                with torch.no_grad():
                    self.emb.weight.copy_(init_emb)
                self.emb.weight.requires_grad = not freeze
                self.fc = nn.Linear(4, 2)
                self.fc.bias.data.zero_()

            def forward(self, idx):
                return self.fc(self.emb(idx))

        Tagger(torch.randn(10, 4))(torch.tensor([1, 2])).sum().backward()
        """, "GT302"), [Shape("""
        class TreeLSTM(nn.Module):
            def __init__(self, init_emb, freeze):
                super().__init__()
                self.emb = nn.Embedding(10, 4)
                if freeze:
                    self.emb.weight.requires_grad = False
                self.emb.weight.copy_(init_emb)

        TreeLSTM(torch.randn(10, 4), freeze=False)
        """, "GT302", 7, "leaf Variable that requires grad"), Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Linear(4, 4)

            def forward(self, x):
                return self.encoder(x)

        model = Net()
        model.encoder.weight.copy_(torch.eye(4))
        model(torch.randn(2, 4)).sum().backward()
        """, "GT302", 10, "leaf Variable that requires grad")]),
    # GT112: a sum of loss terms overwritten by one of its terms before anything reads it
    "loss-sum-overwritten": (Shape("""
        body, head_a, head_b = nn.Linear(4, 4), nn.Linear(4, 1), nn.Linear(4, 1)
        warmup = False
        h = body(torch.randn(3, 4))
        loss_a, loss_b = head_a(h).pow(2).mean(), head_b(h).abs().mean()
        loss = loss_a + 0.5 * loss_b
        if warmup:
            loss = loss_a
        loss.backward()
        """, "GT112", holds="head_b.weight.grad is not None"), [Shape("""
        class LitModel(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc, self.dec = nn.Linear(4, 2), nn.Linear(2, 4)
                self.prior = nn.Linear(2, 2)

            def training_step(self, x):
                z = self.enc(x)
                rec = F.mse_loss(self.dec(z), x)
                kl = self.prior(z).pow(2).mean()
                loss = rec + kl * 0.1
                loss = rec
                return loss

        m = LitModel()
        m.training_step(torch.randn(3, 4)).backward()
        """, "GT112", 12, holds="m.prior.weight.grad is None"), Shape("""
        net, aux = nn.Linear(4, 2), nn.Linear(4, 2)
        x, y = torch.randn(3, 4), torch.randn(3, 2)
        main_loss = F.mse_loss(net(x), y)
        aux_loss = F.mse_loss(aux(x), y)
        total = main_loss + aux_loss - 0.0
        total = main_loss
        total.backward()
        """, "GT112", 6, holds="aux.weight.grad is None")]),
    # GT522: step before a later backward of the pass that reaches the stepped model
    "step-before-last-backward": (Shape("""
        G, D = nn.Linear(4, 4), nn.Linear(4, 1)
        opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
        opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
        for _ in range(2):
            real, z = torch.randn(3, 4), torch.randn(3, 4)
            opt_d.zero_grad()
            loss_d = D(G(z).detach()).mean() - D(real).mean()
            loss_d.backward()
            opt_d.step()
            opt_g.zero_grad()
            loss_g = -D(G(z)).mean()
            loss_g.backward()
            opt_g.step()
        """, "GT522", holds="G.weight.grad is not None"), [Shape("""
        def train(lam, steps=3):
            torch.manual_seed(0)
            model, critic = nn.Linear(4, 4), nn.Linear(4, 1)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for _ in range(steps):
                x, y = torch.randn(3, 4), torch.randn(3, 4)
                optimizer.zero_grad()
                F.mse_loss(model(x), y).backward()
                optimizer.step()
                aux = critic(model(torch.randn(3, 4))).mean() * lam
                aux.backward()
            return model.weight.detach().clone()
        """, "GT522", 9, holds="torch.equal(train(1.0), train(0.0))"), Shape("""
        class Trainer:
            def __init__(self, lam):
                torch.manual_seed(0)
                self.net, self.disc, self.lam = nn.Linear(4, 4), nn.Linear(4, 1), lam
                self.opt = torch.optim.Adam(self.net.parameters(), lr=1e-2)
                self.opt_disc = torch.optim.Adam(self.disc.parameters(), lr=1e-2)

            def fit(self, batches):
                for x, y in batches:
                    self.opt.zero_grad()
                    self.opt_disc.zero_grad()
                    for p in self.disc.parameters():
                        p.requires_grad = False
                    F.mse_loss(self.net(x), y).backward()
                    self.opt.step()
                    adv = self.disc(self.net(x)).mean() * self.lam
                    adv.backward()
                    for p in self.disc.parameters():
                        p.requires_grad = True
                    loss_disc = self.disc(self.net(x).detach()).mean()
                    loss_disc.backward()
                    self.opt_disc.step()
                return self.net.weight.detach().clone()

        batches = [(torch.randn(3, 4), torch.randn(3, 4)) for _ in range(3)]
        same = torch.equal(Trainer(1.0).fit(batches), Trainer(0.0).fit(batches))
        """, "GT522", 15, holds="same")]),
}


def _run(shape: Shape) -> dict:
    env: dict = {}
    if shape.raises:
        with pytest.raises(Exception, match=shape.raises):
            exec(compile(_source(shape), "shape.py", "exec"), env)
    else:
        exec(compile(_source(shape), "shape.py", "exec"), env)
    if shape.holds:
        assert eval(shape.holds, env)
    return env


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    good, _ = SHAPES[name]
    assert _found(good) == []
    _run(good)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twins_are_reported_and_fail(name: str) -> None:
    _, bads = SHAPES[name]
    assert len(bads) >= 2
    for bad in bads:
        assert _found(bad) == [(bad.line, bad.code)], bad.src
        _run(bad)


def test_module_attribute_before_init_trusts_an_imported_parent() -> None:
    """transformers' modular_*.py templates assign layers before `super().__init__(config)` of
    an imported parent on purpose (a generator inlines the parent's body there): GT416 speaks
    only when the class reaches nn.Module through classes of the file."""
    src = (
        "import torch.nn as nn\n"
        "from .modeling_base import BaseModel\n"
        "class HybridModel(BaseModel):\n"
        "    def __init__(self, config):\n"
        "        self.proj = nn.Linear(4, 4)\n"
        "        super().__init__(config)\n"
        "class Local(nn.Module):\n"
        "    def __init__(self):\n"
        "        self.proj = nn.Linear(4, 4)\n"
        "        super().__init__()\n")
    from gradtrace.lint import check_source
    assert [(f.line, f.code) for f in check_source(src, "m.py", select=["GT416"])] == [
        (9, "GT416")]
