"""Mechanisms of held-out batch 5 (issue #13 §3) that cross functions, objects and classes or
are one statement no rule read: each rule with a look-alike that stays silent and trains, and
buggy twins in other spellings than the real-world case, reported on their line and showing
the symptom on real torch.

Same harness as test_heldout_shapes.py.
"""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _run

torch = pytest.importorskip("torch")

NOT_GRAD = "does not require grad"

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    # GT445: a Parameter built in forward (stand_alone_attention, evolvegcn)
    "parameter-built-in-forward": (Shape("""
        class Scale(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.fc = nn.Linear(d, d)
                self.gain = None

            def forward(self, x):
                if self.gain is None:
                    self.gain = nn.Parameter(torch.ones(x.shape[-1]))
                return self.fc(x) * self.gain

        m = Scale(4)
        m(torch.randn(2, 4))
        opt = torch.optim.SGD(m.parameters(), lr=0.5)
        g0 = m.gain.detach().clone()
        for _ in range(3):
            opt.zero_grad()
            m(torch.randn(8, 4)).pow(2).mean().backward()
            opt.step()
        """, "GT445", holds="not torch.equal(m.gain.detach(), g0)"), [Shape("""
        class Gated(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.fc = nn.Linear(d, d)
                self.d = d

            def gate(self, h):
                self.g = torch.nn.Parameter(torch.zeros(self.d))
                return h * torch.sigmoid(self.g)

            def forward(self, x):
                return self.gate(self.fc(x))

        m = Gated(4)
        opt = torch.optim.Adam(m.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            m(torch.randn(8, 4)).sum().backward()
            opt.step()
        """, "GT445", 8, holds="torch.equal(m.g.detach(), torch.zeros(4))"), Shape("""
        from torch.nn import Parameter

        class HyperLinear(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.hyper = nn.Linear(d, d * d)
                self.out = nn.Linear(d, d)
                self.d = d

            def forward(self, x, z):
                self.out.weight = Parameter(self.hyper(z).view(self.d, self.d))
                return self.out(x)

        m = HyperLinear(3)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        opt.zero_grad()
        m(torch.randn(5, 3), torch.randn(3)).sum().backward()
        """, "GT445", 11, holds="m.hyper.weight.grad is None"), Shape("""
        class Recurrent(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.cell = nn.GRUCell(d, d)
                self.d = d

            def forward(self, xs):
                self.h0 = torch.zeros(1, self.d, requires_grad=True)
                h = self.h0
                for x in xs:
                    h = self.cell(x, h)
                return h

        m = Recurrent(3)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        m(torch.randn(4, 1, 3)).sum().backward()
        opt.step()
        """, "GT445", 8, holds="all(p is not m.h0 for p in m.parameters())")]),
    # GT213: the training closure run by a no-grad optimizer step (lightning_hf_adamw)
    "closure-run-under-no-grad": (Shape("""
        class Momentum(torch.optim.Optimizer):
            def __init__(self, params, lr=0.1):
                super().__init__(params, {"lr": lr})

            @torch.no_grad()
            def step(self, closure=None):
                loss = None
                if closure is not None:
                    with torch.enable_grad():
                        loss = closure()
                for group in self.param_groups:
                    for p in group["params"]:
                        p.add_(p.grad, alpha=-group["lr"])
                return loss

        net = nn.Linear(3, 1)
        w0 = net.weight.detach().clone()
        opt = Momentum(net.parameters())
        x, y = torch.randn(8, 3), torch.randn(8, 1)
        def closure():
            opt.zero_grad()
            loss = F.mse_loss(net(x), y)
            loss.backward()
            return loss
        opt.step(closure)
        """, "GT213", holds="not torch.equal(net.weight, w0)"), [Shape("""
        class Sgd(torch.optim.Optimizer):
            def __init__(self, params, lr=0.1):
                super().__init__(params, dict(lr=lr))

            def step(self, fn=None):
                with torch.no_grad():
                    loss = fn() if fn is not None else None
                    for group in self.param_groups:
                        for p in group["params"]:
                            p -= group["lr"] * p.grad
                return loss

        net = nn.Linear(3, 1)
        opt = Sgd(net.parameters())
        def closure():
            opt.zero_grad()
            loss = net(torch.randn(4, 3)).pow(2).mean()
            loss.backward()
            return loss
        opt.step(closure)
        """, "GT213", 7, raises=NOT_GRAD), Shape("""
        class Base(torch.optim.Optimizer):
            pass

        class Lion(Base):
            def __init__(self, params, lr=1e-3):
                super().__init__(params, {"lr": lr})

            @torch.no_grad()
            def update(self, closure):
                loss = closure()
                for group in self.param_groups:
                    for p in group["params"]:
                        p.add_(p.grad.sign(), alpha=-group["lr"])
                return loss

        net = nn.Linear(2, 1)
        opt = Lion(net.parameters())
        def closure():
            opt.zero_grad()
            out = net(torch.randn(4, 2)).sum()
            out.backward()
            return out
        opt.update(closure)
        """, "GT213", 10, raises=NOT_GRAD)]),
    # GT214: a no-grad forward of a module the file unfreezes or optimizes (llava)
    "no-grad-forward-of-trained-module": (Shape("""
        class Backbone(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Linear(6, 6)

            @torch.no_grad()
            def forward(self, x):
                return self.conv(x)

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone = Backbone()
                self.head = nn.Linear(6, 2)

            def forward(self, x):
                return self.head(self.backbone(x))

        net = Net()
        opt = torch.optim.SGD(net.head.parameters(), lr=0.1)
        w0 = net.head.weight.detach().clone()
        opt.zero_grad()
        net(torch.randn(4, 6)).sum().backward()
        opt.step()
        """, "GT214", holds="not torch.equal(net.head.weight, w0)"), [Shape("""
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(6, 6), nn.ReLU())

            def forward(self, x):
                with torch.no_grad():
                    h = self.body(x)
                return h

        enc, head = Encoder(), nn.Linear(6, 2)
        for p in enc.parameters():
            p.requires_grad = True
        opt = torch.optim.SGD(list(enc.parameters()) + list(head.parameters()), lr=0.1)
        opt.zero_grad()
        head(enc(torch.randn(4, 6))).sum().backward()
        opt.step()
        """, "GT214", 7, holds="enc.body[0].weight.grad is None"), Shape("""
        class Tower(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(5, 5)

            @torch.no_grad()
            def forward(self, x):
                return self.proj(x).relu()

        def build():
            tower = Tower()
            head = nn.Linear(5, 1)
            tower_opt = torch.optim.Adam(tower.parameters(), lr=1e-3)
            return tower, head, tower_opt

        tower, head, tower_opt = build()
        head(tower(torch.randn(3, 5))).sum().backward()
        """, "GT214", 6, holds="tower.proj.weight.grad is None"), Shape("""
        class Clip(nn.Module):
            def __init__(self):
                super().__init__()
                self.visual = nn.Linear(6, 4)
                self.text = nn.Linear(6, 4)
                self.visual.requires_grad_(False)

            @torch.no_grad()
            def encode_image(self, x):
                return self.visual(x)

            def forward(self, img, txt):
                return (self.encode_image(img) * self.text(txt)).sum(-1)

        clip = Clip()
        clip.visual.requires_grad_(True)
        clip(torch.randn(2, 6), torch.randn(2, 6)).sum().backward()
        """, "GT214", 8, holds="clip.visual.weight.grad is None")]),
    # GT446: one module object repeated into the layer list (nngeometry)
    "module-repeated-in-list": (Shape("""
        import copy
        block = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
        blocks = nn.ModuleList([copy.deepcopy(block) for _ in range(3)])
        net = nn.Sequential(*blocks, *([nn.ReLU()] * 2), nn.Linear(4, 1))
        heads = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
        """, "GT446", holds="len(list(net.parameters())) == 8"), [Shape("""
        class ResBlock(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.conv = nn.Conv2d(n, n, 3, padding=1)

            def forward(self, x):
                return x + self.conv(x).relu()

        class NetResDeep(nn.Module):
            def __init__(self, n=4, n_blocks=5):
                super().__init__()
                self.blocks = nn.Sequential(*(n_blocks * [ResBlock(n)]))

            def forward(self, x):
                return self.blocks(x)

        net = NetResDeep()
        """, "GT446", 12, holds="len(list(net.parameters())) == 2"), Shape("""
        def clones(module, n):
            return nn.ModuleList([module for _ in range(n)])

        layer = nn.Linear(8, 8)
        stack = clones(layer, 6)
        """, "GT446", 2, holds="len(list(stack.parameters())) == 2")]),
    # GT447: the optimizer over one instance, the loop trains another (pytorch recipe)
    "optimizer-over-other-instance": (Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)

            def forward(self, x):
                return self.fc(x)

        model = Net()
        old = Net()
        old.load_state_dict(model.state_dict())
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        w0 = model.fc.weight.detach().clone()
        for _ in range(2):
            opt.zero_grad()
            F.cross_entropy(model(torch.randn(4, 4)), torch.tensor([0, 1, 0, 1])).backward()
            opt.step()
        print(old(torch.randn(1, 4)))
        """, "GT447", holds="not torch.equal(model.fc.weight, w0)"), [Shape("""
        def run(epochs):
            student = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
            teacher = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
            optimizer = torch.optim.Adam(teacher.parameters(), lr=1e-2)
            for _ in range(epochs):
                optimizer.zero_grad()
                F.mse_loss(student(torch.randn(4, 4)), torch.zeros(4, 2)).backward()
                optimizer.step()
            return student

        s = run(2)
        """, "GT447", 4, holds="all(p.grad is not None for p in s.parameters())"), Shape("""
        class Policy(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 1)

            def forward(self, x):
                return self.fc(x)

        def main():
            policy, target = Policy(), Policy()
            target.load_state_dict(policy.state_dict())
            w0 = policy.fc.weight.detach().clone()
            opt = torch.optim.RMSprop(target.parameters(), lr=1e-2)
            for _ in range(2):
                loss = policy(torch.randn(2, 3)).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            return policy, w0

        policy, w0 = main()
        """, "GT447", 13, holds="torch.equal(policy.fc.weight, w0)")]),
    # GT448: unfrozen by a method or helper after a trainable-only optimizer (detectron2)
    "unfrozen-by-call-after-optimizer": (Shape("""
        def set_trainable(module):
            for p in module.parameters():
                p.requires_grad_(True)

        model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
        model[0].requires_grad_(False)
        opt = torch.optim.SGD(filter(lambda p: p.requires_grad, model.parameters()), lr=0.1)
        w0 = model[0].weight.detach().clone()
        for epoch in range(3):
            if epoch == 1:
                set_trainable(model[0])
                opt.add_param_group({"params": model[0].parameters()})
            opt.zero_grad()
            model(torch.randn(8, 4)).pow(2).mean().backward()
            opt.step()
        """, "GT448", holds="not torch.equal(model[0].weight, w0)"), [Shape("""
        def set_trainable(module):
            for p in module.parameters():
                p.requires_grad_(True)

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Linear(4, 4)
                self.head = nn.Linear(4, 1)

            def forward(self, x):
                return self.head(self.encoder(x).relu())

        model = Net()
        model.encoder.requires_grad_(False)
        opt = torch.optim.SGD(filter(lambda p: p.requires_grad, model.parameters()), lr=0.1)
        w0 = model.encoder.weight.detach().clone()
        for epoch in range(3):
            if epoch == 1:
                set_trainable(model.encoder)
            opt.zero_grad()
            model(torch.randn(8, 4)).pow(2).mean().backward()
            opt.step()
        """, "GT448", 3, holds="torch.equal(model.encoder.weight, w0)"), Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.out = nn.Linear(4, 1)
                self.fc.weight.requires_grad = False

            def forward(self, x):
                return self.out(self.fc(x))

            def thaw(self):
                for name, p in self.named_parameters():
                    p.requires_grad = True

        def make_optimizer(net):
            params = [p for p in net.parameters() if p.requires_grad]
            return torch.optim.Adam(params, lr=0.1)

        net = Net()
        opt = make_optimizer(net)
        w0 = net.fc.weight.detach().clone()
        net.thaw()
        for _ in range(2):
            opt.zero_grad()
            net(torch.randn(2, 4)).sum().backward()
            opt.step()
        """, "GT448", 13, holds="torch.equal(net.fc.weight, w0)")]),
    # GT113: forward writes layer outputs through `.data` (qwen_vl)
    "write-through-data-in-forward": (Shape("""
        class SoftPrompt(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(20, 6)
                self.embed.requires_grad_(False)
                self.prompt = nn.Embedding(3, 6)
                self.head = nn.Linear(6, 2)

            def forward(self, ids):
                h = self.embed(ids).clone()
                h[:, :3] = self.prompt.weight
                h.data[:, -1] = 0.0
                return self.head(h.mean(1))

        m = SoftPrompt()
        m(torch.randint(0, 20, (2, 5))).sum().backward()
        """, "GT113", holds="m.prompt.weight.grad is not None"), [Shape("""
        class SoftPrompt(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(20, 6)
                self.prompt = nn.Embedding(3, 6)
                self.head = nn.Linear(6, 2)

            def forward(self, ids):
                h = self.embed(ids)
                h.data[:, :3].copy_(self.prompt.weight)
                return self.head(h.mean(1))

        m = SoftPrompt()
        m(torch.randint(0, 20, (2, 5))).sum().backward()
        """, "GT113", 10, holds="m.prompt.weight.grad is None"), Shape("""
        class Refine(nn.Module):
            def __init__(self):
                super().__init__()
                self.coarse = nn.Linear(4, 4)
                self.fine = nn.Linear(4, 4)

            def forward(self, x):
                out = self.coarse(x)
                refined = torch.tanh(self.fine(x))
                mask = out > 0
                out.data[mask] = refined[mask]
                return out

        m = Refine()
        m(torch.randn(8, 4)).sum().backward()
        """, "GT113", 11, holds="m.fine.weight.grad is None")]),
    # GT215: the no-grad block only switches modules to eval; the calls follow it (gpt_sovits)
    "no-grad-block-misses-frozen-calls": (Shape("""
        backbone, head = nn.Linear(4, 4), nn.Linear(4, 1)
        opt = torch.optim.SGD(list(backbone.parameters()) + list(head.parameters()), lr=0.1)
        w0 = backbone.weight.detach().clone()
        for _ in range(2):
            with torch.no_grad():
                backbone.eval()
                feats = backbone(torch.randn(8, 4))
            loss = F.mse_loss(head(feats), torch.zeros(8, 1))
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT215", holds="torch.equal(backbone.weight, w0)"), [Shape("""
        def train_step(backbone, head, opt, x, y):
            with torch.no_grad():
                backbone.eval()
            feats = backbone(x)
            loss = F.mse_loss(head(feats), y)
            opt.zero_grad()
            loss.backward()
            opt.step()

        backbone, head = nn.Linear(4, 4), nn.Linear(4, 1)
        opt = torch.optim.SGD(list(backbone.parameters()) + list(head.parameters()), lr=0.1)
        w0 = backbone.weight.detach().clone()
        train_step(backbone, head, opt, torch.randn(8, 4), torch.zeros(8, 1))
        """, "GT215", 4, holds="not torch.equal(backbone.weight, w0)"), Shape("""
        class Distill(nn.Module):
            def __init__(self, freeze=True):
                super().__init__()
                self.encoder = nn.Linear(4, 4)
                self.decoder = nn.Linear(4, 4)
                self.freeze = freeze

            def forward(self, x):
                with torch.set_grad_enabled(False):
                    if self.freeze:
                        self.encoder.train(False)
                z = self.encoder(x)
                return self.decoder(z)

        m = Distill()
        m(torch.randn(2, 4)).sum().backward()
        """, "GT215", 12, holds="m.encoder.weight.grad is not None")]),
    # GT307 across a helper: the caller reads `.grad` of a non-leaf the helper returns
    # (advertorch FGSM `perturb`); reported where the helper's result is bound (static26a)
    "grad-of-non-leaf-returned-by-helper": (Shape("""
        class Attack:
            def __init__(self, model, eps):
                self.model, self.eps = model, eps

            def perturb(self, x, y):
                x = x.detach().clone().requires_grad_()
                F.cross_entropy(self.model(x), y).backward()
                adv = (x + self.eps * x.grad.sign()).clamp(0, 1)
                return adv.detach().requires_grad_()

        model = nn.Linear(4, 3)
        x_adv = Attack(model, 0.1).perturb(torch.rand(2, 4), torch.tensor([0, 2]))
        F.cross_entropy(model(x_adv), torch.tensor([0, 2])).backward()
        g = x_adv.grad.abs()
        """, "GT307", holds="g is not None"), [Shape("""
        def pgd_step(model, x, y, eps):
            x = x.clone().requires_grad_(True)
            g, = torch.autograd.grad(F.cross_entropy(model(x), y), x)
            return x + eps * g.sign()

        model = nn.Linear(4, 3)
        y = torch.tensor([0, 2])
        x_adv = pgd_step(model, torch.rand(2, 4), y, 0.1)
        F.cross_entropy(model(x_adv), y).backward()
        saliency = x_adv.grad
        """, "GT307", 8, holds="saliency is None"), Shape("""
        def scale(t, s):
            return torch.sigmoid(t * s)

        w = torch.randn(3, requires_grad=True)
        v = scale(w, 2.0)
        v.sum().backward()
        print(v.grad)
        """, "GT307", 5, holds="v.grad is None and w.grad is not None")]),
    # GT216: a live prediction rebound from itself under no_grad (consistency_policy)
    "live-output-rebound-under-no-grad": (Shape("""
        class Distiller(nn.Module):
            def __init__(self):
                super().__init__()
                self.student = nn.Linear(4, 4)
                self.teacher = nn.Linear(4, 4)

            def loss(self, x):
                out = self.student(x)
                with torch.no_grad():
                    tgt = self.teacher(x)
                    mapped = self.teacher(out)
                    acc = (out.argmax(-1) == tgt.argmax(-1)).float().mean()
                return F.mse_loss(out, tgt) + F.mse_loss(out, mapped)

        d = Distiller()
        d.loss(torch.randn(2, 4)).backward()
        """, "GT216", holds="d.student.weight.grad is not None"), [Shape("""
        class Distiller(nn.Module):
            def __init__(self):
                super().__init__()
                self.student = nn.Linear(4, 4)
                self.teacher = nn.Linear(4, 4)

            def loss(self, x):
                out = self.student(x)
                with torch.no_grad():
                    tgt = self.teacher(x)
                    out = torch.tanh(self.teacher(out))
                return F.mse_loss(out, tgt)

        d = Distiller()
        d.loss(torch.randn(2, 4)).backward()
        """, "GT216", 11, raises=NOT_GRAD), Shape("""
        net, proj = nn.Linear(3, 3), nn.Linear(3, 3)

        def step(x):
            z = net(x)
            with torch.no_grad():
                z = proj(z)
            loss = z.pow(2).mean() + net(x).mean()
            loss.backward()

        step(torch.randn(2, 3))
        """, "GT216", 6, holds="proj.weight.grad is None")]),
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
        assert _found(bad) == ([] if bad.line is None else [(bad.line, bad.code)]), bad.src
        _run(bad)
