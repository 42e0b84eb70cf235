"""static27h (issue 13, held-out batch 21 at first contact): one mechanism per miss, each with a
silent look-alike that trains and buggy twins in spellings the case does not show, reported on
the line a maintainer changes, run on real torch."""
from __future__ import annotations

import pytest
import torch
from test_heldout_shapes import Shape, _found, _run

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    # GT402, mechanism: a module class defined inside a function or method (a class factory)
    # stores a tensor that requires grad as a plain attribute: not in parameters() (spirl)
    "plain-learnable-tensor-in-class-factory": (Shape("""
        def build_init(size):
            class Init(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.val = nn.Parameter(torch.zeros(1, size))
                    self.table = torch.arange(size)

                def forward(self, s):
                    return self.val.repeat(s.shape[0], 1)
            return Init()

        init = build_init(3)
        n = len(list(init.parameters()))
        """, "GT402", holds="n == 1"), [Shape("""
        class Decoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.cell = nn.LSTMCell(4, 8)
                self.first = self._initializer(4)

            def _initializer(self, size):
                class FixedTrainableInitializer(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.val = torch.zeros((1, size), requires_grad=True)

                    def forward(self, state):
                        return self.val.repeat(state.shape[0], 1)
                return FixedTrainableInitializer()

        dec = Decoder()
        names = [n for n, _ in dec.named_parameters()]
        """, "GT402", 11, holds="not any('val' in n for n in names)"), Shape("""
        def make_gate(n):
            class Gate(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.g = torch.ones(n)
                    self.g.requires_grad = True

                def forward(self, x):
                    return x * self.g
            return Gate()

        gate = make_gate(4)
        k = len(list(gate.parameters()))
        """, "GT402", 5, holds="k == 0")]),
    # GT210, mechanism: `torch.set_grad_enabled(False)` as a statement turns grad off for the
    # statements after it; a helper of the file that differentiates its own forward runs
    # there before the restore (convex_adversarial's PGD inside evaluate_robust)
    "gradient-helper-after-set-grad-enabled-false": (Shape("""
        def attack(model, x, y, eps):
            x = x.clone().requires_grad_(True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            return (x + eps * x.grad.sign()).detach()

        def evaluate_robust(model, batches, eps):
            adv = [(attack(model, x, y, eps), y) for x, y in batches]
            torch.set_grad_enabled(False)
            errors = [(model(x).argmax(1) != y).sum().item() for x, y in adv]
            torch.set_grad_enabled(True)
            return errors

        net = nn.Linear(4, 3)
        errs = evaluate_robust(net, [(torch.randn(5, 4), torch.randint(0, 3, (5,)))], 0.1)
        ok = torch.is_grad_enabled()
        """, "GT210", holds="ok"), [Shape("""
        def attack(model, x, y, eps):
            x = x.clone().requires_grad_(True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            return (x + eps * x.grad.sign()).detach()

        def evaluate_robust(model, batches, eps):
            model.eval()
            torch.set_grad_enabled(False)
            errors = []
            for x, y in batches:
                errors.append((model(attack(model, x, y, eps)).argmax(1) != y).sum().item())
            torch.set_grad_enabled(True)
            return errors

        net = nn.Linear(4, 3)
        evaluate_robust(net, [(torch.randn(5, 4), torch.randint(0, 3, (5,)))], 0.1)
        """, "GT210", 9, "does not require grad"), Shape("""
        class Probe:
            def __init__(self, model):
                self.model = model

            def saliency(self, x):
                x = x.clone().requires_grad_(True)
                score = self.model(x).max(1)[0].sum()
                g, = torch.autograd.grad(score, x)
                return g.abs()

            def report(self, xs):
                torch.autograd.set_grad_enabled(False)
                maps = [self.saliency(x) for x in xs]
                torch.autograd.set_grad_enabled(True)
                return maps

        Probe(nn.Linear(4, 3)).report([torch.randn(2, 4)])
        """, "GT210", 12, "does not require grad")]),
    # GT519, mechanism: the `% N` branch steps the optimizer (an accumulation) and a second
    # step of the same optimizer runs on every pass outside it (ECO-pytorch's stray step)
    "second-step-outside-accumulation-branch": (Shape("""
        net = nn.Linear(4, 2)
        opt = torch.optim.Adam(net.parameters(), lr=0.01)
        accum = 4
        for i in range(8):
            net(torch.randn(3, 4)).pow(2).mean().backward()
            if (i + 1) % accum == 0:
                for p in net.parameters():
                    p.grad /= accum
                opt.step()
                opt.zero_grad()
        steps = int(opt.state[net.weight]["step"])
        """, "GT519", holds="steps == 2"), [Shape("""
        def train(net, batches, opt, iter_size):
            for i, (x, y) in enumerate(batches):
                F.mse_loss(net(x), y).backward()
                if i % iter_size == 0:
                    for g in opt.param_groups:
                        for p in g["params"]:
                            p.grad /= iter_size
                    opt.step()
                    opt.zero_grad()
                opt.step()

        net = nn.Linear(4, 2)
        opt = torch.optim.Adam(net.parameters(), lr=0.01)
        train(net, [(torch.randn(3, 4), torch.randn(3, 2)) for _ in range(8)], opt, 4)
        steps = int(opt.state[net.weight]["step"])
        """, "GT519", 10, holds="steps == 8"), Shape("""
        net = nn.Linear(4, 2)
        opt = torch.optim.Adam(net.parameters(), lr=0.01)
        accum_steps = 4
        for step in range(8):
            net(torch.randn(3, 4)).pow(2).mean().backward()
            opt.step()
            if (step + 1) % accum_steps == 0:
                opt.step()
                opt.zero_grad()
        steps = int(opt.state[net.weight]["step"])
        """, "GT519", 6, holds="steps == 10")]),
    # GT605, mechanism: a helper's local computed by indexing and arithmetic from an argument
    # its caller passes with grad is divided in place by its own norm; the caller takes
    # forces with torch.autograd.grad (smirnoffee's angle energy)
    "norm-saved-input-written-in-passed-helper": (Shape("""
        def angle_energy(conformer, idx):
            ab = conformer[idx[:, 1]] - conformer[idx[:, 0]]
            ab = ab / torch.norm(ab, dim=1).unsqueeze(1)
            ac = conformer[idx[:, 1]] - conformer[idx[:, 2]]
            ac = ac / torch.norm(ac, dim=1).unsqueeze(1)
            return torch.acos((ab * ac).sum(dim=1).clamp(-0.99, 0.99)).sum()

        xyz = torch.randn(4, 3).requires_grad_(True)
        e = angle_energy(xyz, torch.tensor([[0, 1, 2], [1, 2, 3]]))
        g, = torch.autograd.grad(e, xyz)
        """, "GT605", holds="g.abs().sum() > 0"), [Shape("""
        def angle_energy(conformer, idx):
            ab = conformer[idx[:, 1]] - conformer[idx[:, 0]]
            ab /= torch.norm(ab, dim=1).unsqueeze(1)
            return ab.sum()

        xyz = torch.randn(4, 3).requires_grad_(True)
        e = angle_energy(xyz, torch.tensor([[0, 1, 2], [1, 2, 3]]))
        g, = torch.autograd.grad(e, xyz)
        """, "GT605", 3, "modified by an inplace operation"), Shape("""
        def pair_dirs(pos):
            d = (pos[:, None] - pos[None]) * 2.0
            d *= F.softplus(d)
            return d

        pos = torch.randn(5, 3, requires_grad=True)
        forces = torch.autograd.grad(pair_dirs(pos).sum(), pos)
        """, "GT605", 3, "modified by an inplace operation")]),
    # GT602, mechanism: an in-place method chained straight on the unnamed result of an op
    # that saves its output (a norm, exp, softmax...) (pytti's spherical_dist_loss)
    "inplace-chained-on-saved-output": (Shape("""
        def spherical_dist_loss(x, y):
            x = F.normalize(x, dim=-1)
            y = F.normalize(y, dim=-1)
            return (x - y).norm(dim=-1).div(2).arcsin_().pow(2).mul(2)

        emb = nn.Linear(6, 4)
        loss = spherical_dist_loss(emb(torch.randn(3, 6)), torch.randn(3, 4)).mean()
        loss.backward()
        """, "GT602", holds="emb.weight.grad is not None"), [Shape("""
        def spherical_dist_loss(x, y):
            x = F.normalize(x, dim=-1)
            y = F.normalize(y, dim=-1)
            return x.sub_(y).norm(dim=-1).div_(2).arcsin_().pow_(2).mul_(2)

        emb = nn.Linear(6, 4)
        loss = spherical_dist_loss(emb(torch.randn(3, 6)), torch.randn(3, 4)).mean()
        loss.backward()
        """, "GT602", 4, "modified by an inplace operation"), Shape("""
        def masked_energy_loss(logits, keep):
            return torch.exp(logits).mul_(keep).sum()

        head = nn.Linear(6, 4)
        loss = masked_energy_loss(head(torch.randn(3, 6)), torch.ones(3, 4))
        loss.backward()
        """, "GT602", 2, "modified by an inplace operation"), Shape("""
        class Attn(nn.Module):
            def __init__(self):
                super().__init__()
                self.q = nn.Linear(4, 4)

            def forward(self, x, mask):
                w = self.q(x).softmax(-1).masked_fill_(mask, 0.0)
                return w * x

        attn = Attn()
        attn(torch.randn(3, 4), torch.rand(3, 4) > 0.5).sum().backward()
        """, "GT602", 7, "modified by an inplace operation")]),
    # GT602, mechanism: an in-place dropout attribute runs on the output of a block that ends
    # in an output-saving activation, named or nested (torchgeo's LTAE); the flag is the fix
    "inplace-dropout-attribute-on-saved-output": (Shape("""
        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(inplace=True))
                self.fc = nn.Linear(8, 8)
                self.dropout = nn.Dropout(0.2, inplace=True)
                self.out_drop = nn.Dropout(0.2)

            def forward(self, x):
                return self.out_drop(self.mlp(x)) + self.dropout(self.fc(self.mlp(x)))

        head = Head().train()
        head(torch.randn(3, 4)).sum().backward()
        """, "GT602", holds="head.fc.weight.grad is not None"), [Shape("""
        class LTAE(nn.Module):
            def __init__(self, dims=(4, 8, 8)):
                super().__init__()
                activation = nn.ReLU(inplace=True)
                layers = []
                for i in range(len(dims) - 1):
                    layers.extend([nn.Linear(dims[i], dims[i + 1]), nn.BatchNorm1d(dims[i + 1]),
                                   activation])
                self.mlp = nn.Sequential(*layers)
                self.dropout = nn.Dropout(0.2, inplace=True)
                self.norm = nn.LayerNorm(dims[-1])

            def forward(self, x):
                return self.norm(self.dropout(self.mlp(x)))

        model = LTAE().train()
        model(torch.randn(5, 4)).pow(2).mean().backward()
        """, "GT602", 10, "modified by an inplace operation"), Shape("""
        class Gate(nn.Module):
            def __init__(self):
                super().__init__()
                self.score = nn.Sequential(nn.Linear(4, 4), nn.Sigmoid())
                self.drop = nn.Dropout(p=0.5, inplace=True)

            def forward(self, x):
                g = self.score(x)
                g = self.drop(g)
                return g * x

        gate = Gate().train()
        gate(torch.randn(3, 4)).sum().backward()
        """, "GT602", 5, "modified by an inplace operation")]),
    # GT720, mechanism: `torch.normal(mean, std)` records a graph whose backward gives zeros
    # to `mean` and `std`: a bottleneck drawn with it trains nothing before it through the
    # sample (ml-agents' VAIL); noise around data (`torch.normal(x, 0.1)`) is fine
    "torch-normal-draw-of-learned-mean": (Shape("""
        class Bottleneck(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc, self.mu, self.head = nn.Linear(6, 8), nn.Linear(8, 4), nn.Linear(4, 1)
                self.sigma = nn.Parameter(torch.ones(4))

            def forward(self, x, noisy=True):
                x = torch.normal(x, 0.1) if noisy else x
                z_mu = self.mu(self.enc(x))
                z = z_mu + torch.randn_like(z_mu) * self.sigma
                return self.head(z)

        net = Bottleneck()
        net(torch.randn(5, 6)).sum().backward()
        """, "GT720", holds="net.mu.weight.grad.abs().sum() > 0"), [Shape("""
        class Bottleneck(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc, self.mu, self.head = nn.Linear(6, 8), nn.Linear(8, 4), nn.Linear(4, 1)
                self.sigma = nn.Parameter(torch.ones(4))

            def forward(self, x):
                z_mu = self.mu(self.enc(x))
                z = torch.normal(z_mu, self.sigma)
                return self.head(z)

        net = Bottleneck()
        net(torch.randn(5, 6)).sum().backward()
        """, "GT720", 9, holds="net.mu.weight.grad.abs().sum() == 0 and net.head.weight.grad is not None"),
        Shape("""
        def latent_step(encoder, decoder, opt, x, log_std):
            mean = encoder(x)
            z = torch.normal(mean=mean, std=log_std.exp())
            loss = F.mse_loss(decoder(z), x)
            opt.zero_grad()
            loss.backward()
            opt.step()

        enc, dec = nn.Linear(6, 3), nn.Linear(3, 6)
        log_std = torch.zeros(3, requires_grad=True)
        opt = torch.optim.SGD([*enc.parameters(), *dec.parameters(), log_std], lr=0.1)
        latent_step(enc, dec, opt, torch.randn(4, 6), log_std)
        """, "GT720", 3, holds="enc.weight.grad.abs().sum() == 0 and log_std.grad.abs().sum() == 0")]),
    # GT790, mechanism: hand-made weights (`requires_grad=True` factories at the module
    # level) given to the optimizer as a literal list that leaves one out (spytorch's `v1`)
    "leaf-left-out-of-optimizer-list": (Shape("""
        W = torch.randn(4, 8, requires_grad=True)
        U = torch.randn(8, 8, requires_grad=True)
        b = torch.zeros(8, requires_grad=True)
        probe = torch.zeros(4, requires_grad=True)

        def net(x):
            return torch.tanh(torch.tanh((x + probe) @ W + b) @ U)

        opt = torch.optim.SGD((W, U, b), lr=0.1)
        for _ in range(3):
            loss = net(torch.randn(2, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        sal, = torch.autograd.grad(net(torch.randn(2, 4)).sum(), probe)
        """, "GT790", holds="sal is not None"), [Shape("""
        W = torch.randn(4, 8, requires_grad=True)
        U = torch.randn(8, 8, requires_grad=True)
        b = torch.zeros(8, requires_grad=True)
        U0 = U.detach().clone()

        def net(x):
            return torch.tanh(torch.tanh(x @ W + b) @ U)

        opt = torch.optim.SGD((W, b), lr=0.1)
        for _ in range(3):
            loss = net(torch.randn(2, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT790", 9, holds="torch.equal(U, U0) and U.grad is not None"), Shape("""
        w_in = torch.empty(3, 5, requires_grad=True)
        w_rec = torch.empty(5, 5, requires_grad=True)
        w_out = torch.empty(5, 2, requires_grad=True)
        for w in (w_in, w_rec, w_out):
            torch.nn.init.normal_(w, std=0.3)
        rec0 = w_rec.detach().clone()

        def run(xs):
            h = torch.zeros(xs.shape[0], 5)
            for t in range(xs.shape[1]):
                h = torch.tanh(xs[:, t] @ w_in + h @ w_rec)
            return h @ w_out

        def train(xs, ys):
            params = [w_in, w_out]
            optimizer = torch.optim.Adam(params, lr=1e-2)
            for _ in range(3):
                loss = F.mse_loss(run(xs), ys)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()

        train(torch.randn(4, 6, 3), torch.randn(4, 2))
        """, "GT790", 15, holds="torch.equal(w_rec, rec0) and w_rec.grad is not None")]),
}


@pytest.fixture(autouse=True)
def _grad_mode_restored():
    yield
    torch.set_grad_enabled(True)  # a twin that raises under set_grad_enabled(False)


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
        assert _found(bad) == ([] if bad.line is None else [(bad.line, bad.code)]), bad.src
        _run(bad)
        torch.set_grad_enabled(True)
