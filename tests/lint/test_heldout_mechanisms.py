"""Mechanisms behind held-out misses of session 6 (grad mode, loop order, in-place, autograd
API, numerics), each in more spellings than the case it came from, run on real torch.

Same harness as test_heldout_shapes.py: a look-alike that must stay silent and train, buggy
twins (two or more spellings) that must be reported on the given line and really fail.
"""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _run

torch = pytest.importorskip("torch")

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    # GT705: an old-style Function (non-static forward) is instantiated, then called
    "legacy-autograd-function": (Shape("""
        class GradReverse(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, coeff):
                ctx.coeff = coeff
                return x.view_as(x)

            @staticmethod
            def backward(ctx, g):
                return -ctx.coeff * g, None

        x = torch.randn(3, requires_grad=True)
        GradReverse.apply(x, 0.5).sum().backward()
        """, "GT705", holds="bool((x.grad == -0.5).all())"), [Shape("""
        class GradReverse(torch.autograd.Function):
            def __init__(self, coeff=1.0):
                self.coeff = coeff

            def forward(self, x):
                return x.view_as(x)

            def backward(self, g):
                return -self.coeff * g

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.grl = GradReverse()

            def forward(self, x):
                return self.grl(self.fc(x))

        Net()(torch.randn(2, 4)).sum().backward()
        """, "GT705", 5, "Legacy autograd function"), Shape("""
        class Scale(torch.autograd.Function):
            def forward(ctx, x):
                return x * 2

            def backward(ctx, g):
                return g * 2

        def scaled(x):
            return Scale()(x)

        scaled(torch.randn(3, requires_grad=True)).sum().backward()
        """, "GT705", 2, "Legacy autograd function")]),
    # GT604: out= writes into a Parameter / requires-grad tensor with grad on
    "out-argument-into-parameter": (Shape("""
        class Basis(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.freq = nn.Parameter(torch.empty(n))
                self.reset_parameters()

            def reset_parameters(self):
                with torch.no_grad():
                    self.freq.copy_(torch.arange(1, self.freq.numel() + 1)).mul_(3.14)

            def forward(self, d):
                return torch.sin(self.freq * d.unsqueeze(-1))

        m = Basis(4)
        m(torch.rand(5)).sum().backward()
        """, "GT604", holds="m.freq.grad is not None"), [Shape("""
        class Basis(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.freq = nn.Parameter(torch.empty(n))
                self.reset_parameters()

            def reset_parameters(self):
                torch.arange(1, self.freq.numel() + 1, out=self.freq)

        Basis(4)
        """, "GT604", 8, "out=... arguments"), Shape("""
        w = torch.zeros(3, requires_grad=True)
        torch.linspace(0.0, 1.0, 3, out=w)
        """, "GT604", 2, "out=... arguments"), Shape("""
        class Basis(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.freq = nn.Parameter(torch.empty(n))
                with torch.no_grad():
                    torch.arange(1, n + 1, out=self.freq)

        m = Basis(4)
        """, "GT604", 6, holds="not m.freq.requires_grad")]),
    # GT755: log of a softmax that rounds a probability to 0 (logits spread > ~104)
    "log-of-softmax": (Shape("""
        model = nn.Linear(3, 3, bias=False)
        with torch.no_grad():
            model.weight.copy_(torch.eye(3) * 20)
        x = torch.tensor([[0.0, 50.0, -50.0]])
        loss = F.nll_loss(F.log_softmax(model(x), dim=1), torch.tensor([2]))
        loss.backward()
        """, "GT755", holds="bool(torch.isfinite(model.weight.grad).all())"), [Shape("""
        def train_step(model, x, y, opt):
            opt.zero_grad()
            probs = F.softmax(model(x), dim=1)
            loss = F.nll_loss(torch.log(probs), y)
            loss.backward()
            opt.step()

        model = nn.Linear(3, 3, bias=False)
        with torch.no_grad():
            model.weight.copy_(torch.eye(3) * 20)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        train_step(model, torch.tensor([[0.0, 50.0, -50.0]]), torch.tensor([1]), opt)
        """, "GT755", 4, holds="bool(torch.isnan(model.weight).any())"), Shape("""
        class Classifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 3, bias=False)
                self.softmax = nn.Softmax(dim=-1)

            def forward(self, x):
                return self.softmax(self.fc(x)).log()

        net = Classifier()
        with torch.no_grad():
            net.fc.weight.copy_(torch.eye(3) * 20)
        labels = F.one_hot(torch.tensor([1]), 3).float()
        (-(net(torch.tensor([[0.0, 50.0, -50.0]])) * labels).sum()).backward()
        """, "GT755", 8, holds="bool(torch.isnan(net.fc.weight.grad).any())")]),
    # GT516: a periodic validation in the middle of the training loop leaves eval mode on
    "validation-mid-loop-leaves-eval-mode": (Shape("""
        class Pair:
            def __init__(self):
                self.enc = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
                self.opt = torch.optim.SGD(self.enc.parameters(), lr=0.1)

            def train_start(self):
                self.enc.train()

            def val_start(self):
                self.enc.eval()

            def step(self, x):
                self.opt.zero_grad()
                self.enc(x).pow(2).mean().backward()
                self.opt.step()

        pair, modes = Pair(), []
        pair.train_start()
        for i in range(4):
            modes.append(pair.enc.training)
            pair.step(torch.randn(2, 4))
            if i % 2 == 1:
                pair.val_start()
                pair.train_start()
        """, "GT516", holds="all(modes)"), [Shape("""
        class Pair:
            def __init__(self):
                self.enc = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
                self.opt = torch.optim.SGD(self.enc.parameters(), lr=0.1)

            def train_start(self):
                self.enc.train()

            def val_start(self):
                self.enc.eval()

            def step(self, x):
                self.opt.zero_grad()
                self.enc(x).pow(2).mean().backward()
                self.opt.step()

        def validate(model):
            model.val_start()

        pair, modes = Pair(), []
        pair.train_start()
        for i in range(4):
            modes.append(pair.enc.training)
            pair.step(torch.randn(2, 4))
            if i % 2 == 1:
                validate(pair)
        """, "GT516", 26, holds="modes == [True, True, False, False]"), Shape("""
        class Trainer:
            def __init__(self, model, every=2):
                self.model, self.every = model, every
                self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
                self.modes = []

            def validate(self):
                self.model.eval()
                with torch.no_grad():
                    self.model(torch.randn(2, 4))

            def train_epoch(self, batches):
                self.model.train()
                for i, x in enumerate(batches):
                    if i % self.every == 1:
                        self.validate()
                    self.modes.append(self.model.training)
                    self.opt.zero_grad()
                    self.model(x).pow(2).mean().backward()
                    self.opt.step()

        net = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
        t = Trainer(net)
        t.train_epoch([torch.randn(2, 4)] * 3)
        """, "GT516", 16, holds="t.modes == [True, False, False]")]),
    # GT208: enable_grad cannot re-enable grad inside inference_mode
    "enable-grad-inside-inference-mode": (Shape("""
        def input_grad(model, batch):
            with torch.enable_grad():
                x = batch.clone().requires_grad_(True)
                return torch.autograd.grad(model(x).sum(), x)[0]

        def run_test_loop(model, batches):
            with torch.no_grad():
                return [input_grad(model, b) for b in batches]

        grads = run_test_loop(nn.Linear(4, 2), [torch.randn(3, 4)] * 2)
        """, "GT208", holds="grads[0].shape == (3, 4)"), [Shape("""
        class Lit(nn.Module):
            def __init__(self):
                super().__init__()
                self.layer = nn.Linear(4, 4)

            def test_step(self, batch):
                with torch.enable_grad():
                    x = batch.clone().requires_grad_(True)
                    return torch.autograd.grad(self.layer(x).sum(), x)[0]

        @torch.inference_mode()
        def test(model, batches):
            return [model.test_step(b) for b in batches]

        test(Lit(), [torch.randn(2, 4)])
        """, "GT208", 11, "does not require grad"), Shape("""
        model = nn.Linear(4, 1)
        x = torch.randn(3, 4)
        with torch.inference_mode():
            pred = model(x)
            with torch.enable_grad():
                xi = x.clone().requires_grad_(True)
                model(xi).sum().backward()
        """, "GT208", 3, "does not require grad")]),
    # GT209: set_grad_enabled(self.training) in a module switches gradients off in eval mode
    "grad-mode-tied-to-training-flag": (Shape("""
        class Block(nn.Module):
            def __init__(self, frozen=False):
                super().__init__()
                self.frozen = frozen
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                with torch.set_grad_enabled(not self.frozen):
                    return self.fc(x)

        m = Block().eval()
        x = torch.randn(2, 4, requires_grad=True)
        g = torch.autograd.grad(m(x).sum(), x)[0]
        """, "GT209", holds="g.shape == (2, 4)"), [Shape("""
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                with torch.set_grad_enabled(self.training):
                    return self.fc(x)

        m = Block().eval()
        x = torch.randn(2, 4, requires_grad=True)
        torch.autograd.grad(m(x).sum(), x)
        """, "GT209", 7, "does not require grad"), Shape("""
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def encode(self, x):
                torch.set_grad_enabled(self.training)
                out = self.fc(x)
                torch.set_grad_enabled(True)
                return out

            def forward(self, x):
                return self.encode(x)

        net = nn.Sequential(Encoder(), nn.Linear(4, 1)).eval()
        net(torch.randn(2, 4)).sum().backward()
        """, "GT209", 7, holds="net[0].fc.weight.grad is None and net[1].weight.grad is not None")]),
    # GT517: a step wrapper clears only on a flag the loop never passes
    "step-wrapper-clears-only-on-flag": (Shape("""
        w = nn.Parameter(torch.zeros(1))
        opt = torch.optim.SGD([w], lr=0.1)

        def update(optimizer, clear_grads=False):
            optimizer.step()
            if clear_grads:
                optimizer.zero_grad()

        for _ in range(3):
            (w * 1.0).sum().backward()
            update(opt, clear_grads=True)
        """, "GT517", holds="w.grad is None"), [Shape("""
        w = nn.Parameter(torch.zeros(1))
        opt = torch.optim.SGD([w], lr=0.1)

        def update(optimizer, clear_grads=False):
            optimizer.step()
            if clear_grads:
                optimizer.zero_grad()

        for _ in range(3):
            (w * 1.0).sum().backward()
            update(opt)
        """, "GT517", 11, holds="float(w.grad) == 3.0"), Shape("""
        class Runner:
            def __init__(self):
                self.w = nn.Parameter(torch.zeros(1))
                self.opt = torch.optim.SGD([self.w], lr=0.1)

            def train_step(self, x, reset=None):
                (self.w * x).sum().backward()
                self.opt.step()
                if reset:
                    self.opt.zero_grad()

            def fit(self, xs):
                for x in xs:
                    self.train_step(x)

        r = Runner()
        r.fit([torch.ones(1)] * 3)
        """, "GT517", 14, holds="float(r.w.grad) == 3.0")]),
    # GT605: in-place write into the input a layer saved for its weight gradient
    "inplace-write-to-saved-input": (Shape("""
        lin = nn.Linear(4, 4)
        h = torch.randn(2, 4)
        y = lin(h)
        h = h + 1
        (y.sum() + h.sum()).backward()
        """, "GT605", holds="lin.weight.grad is not None"), [Shape("""
        lin = nn.Linear(4, 4)
        h = torch.randn(2, 4)
        y = lin(h)
        h += 1
        y.sum().backward()
        """, "GT605", 4, "modified by an inplace operation"), Shape("""
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = nn.LayerNorm(4)
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                h = self.fc(x)
                z = self.norm(h)
                h.mul_(2)
                return z + h

        Block()(torch.randn(2, 4)).sum().backward()
        """, "GT605", 10, "modified by an inplace operation"), Shape("""
        class Mixer(nn.Module):
            def __init__(self):
                super().__init__()
                self.weight = nn.Parameter(torch.randn(4, 4) * 0.1)

            def forward(self, a):
                y = 0
                b = a @ self.weight
                for i in range(3):
                    b[:, i] = b[:, i] * 2
                    y = y + torch.matmul(b, self.weight)
                return y

        Mixer()(torch.randn(2, 4)).sum().backward()
        """, "GT605", 10, "modified by an inplace operation")]),
    # GT706: autograd.grad over all parameters of a model whose forward skips a layer
    "grad-over-unused-parameters": (Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)
                self.aux_head = nn.Linear(4, 3)

            def forward(self, x):
                return self.fc(x)

        def meta_step(net, x):
            loss = net(x).pow(2).mean()
            return torch.autograd.grad(loss, list(net.parameters()), allow_unused=True)

        grads = meta_step(Net(), torch.randn(2, 4))
        """, "GT706", holds="grads[2] is None and grads[0] is not None"), [Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)
                self.aux_head = nn.Linear(4, 3)

            def forward(self, x):
                return self.fc(x)

        def meta_step(net, x):
            loss = net(x).pow(2).mean()
            return torch.autograd.grad(loss, list(net.parameters()), create_graph=True)

        meta_step(Net(), torch.randn(2, 4))
        """, "GT706", 12, "appears to not have been used"), Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 4)
                self.scale = nn.Parameter(torch.ones(4))

            def forward(self, x):
                return self.body(x)

        class Meta:
            def __init__(self):
                self.model = Net()

            def inner(self, x):
                loss = self.model(x).sum()
                return torch.autograd.grad(loss, self.model.parameters())

        Meta().inner(torch.randn(2, 4))
        """, "GT706", 16, "appears to not have been used")]),
    # GT210: a helper that runs a forward and differentiates it, called under no_grad
    "gradient-helper-under-no-grad": (Shape("""
        def penalty(model, x):
            with torch.enable_grad():
                x = x.clone().requires_grad_(True)
                out = model(x)
                g = torch.autograd.grad(out.sum(), x, create_graph=True)[0]
            return g.norm()

        model = nn.Linear(4, 1)
        with torch.no_grad():
            val = penalty(model, torch.randn(3, 4)).item()
        """, "GT210", holds="val > 0"), [Shape("""
        class Trainer:
            def __init__(self):
                self.model = nn.Linear(4, 1)

            def compute_loss(self, x):
                x = x.clone().requires_grad_(True)
                out = self.model(x)
                g, = torch.autograd.grad(out.sum(), x, create_graph=True)
                return out.mean() + g.norm()

            def evaluate(self, batches):
                with torch.no_grad():
                    return [self.compute_loss(b).item() for b in batches]

        Trainer().evaluate([torch.randn(3, 4)])
        """, "GT210", 12, "does not require grad"), Shape("""
        def penalty(model, x):
            x = x.clone().requires_grad_(True)
            out = model(x)
            g = torch.autograd.grad(out.sum(), x, create_graph=True)[0]
            return g.norm()

        model = nn.Linear(4, 1)
        with torch.inference_mode():
            vals = [penalty(model, torch.randn(3, 4)).item() for _ in range(2)]
        """, "GT210", 8, "does not require grad")]),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
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
