"""GT435-GT439 and GT404 (the optimizer wired to the wrong thing): each buggy twin (two or more spellings)
fires on the right line, each look-alike stays silent, and every snippet runs on real torch to
show the twin's harm (a module never trained, Adam's state restarting, a raise)."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = """
import warnings
import torch
import torch.nn as nn
torch.manual_seed(0)
x, y = torch.randn(8, 3), torch.randn(8, 1)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(3, 4), nn.Linear(4, 1)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))
"""


SHAPES = [
    # GT435: the same module twice (one group: `b` never trains; two groups: a raise)
    Shape("""
        model = Net()
        before = model.b.weight.detach().clone()
        params = list(model.a.parameters()) + list(
            model.a.parameters())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            opt = torch.optim.SGD(params, lr=0.1)
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        """, "GT435", 4, holds="torch.equal(before, model.b.weight)"),
    Shape("""
        class GAN(Net):
            def configure_optimizers(self):
                return torch.optim.SGD([{"params": self.parameters()},
                                        {"params": self.b.parameters(), "lr": 1.0}], lr=0.1)
        GAN().configure_optimizers()
        """, "GT435", 4, (ValueError, "more than one parameter group")),
    Shape("""
        model = Net()
        ignored = list(map(id, model.b.parameters()))
        base = filter(lambda p: id(p) not in ignored, model.parameters())
        opt = torch.optim.SGD([{"params": base}, {"params": model.b.parameters(), "lr": 1.0}],
                              lr=0.1)
        """, "GT435", holds="len(opt.param_groups[0]['params']) == 2"),
    # GT436: Adam rebuilt on every call of a function called in a loop (function, method)
    Shape("""
        def train_epoch(model, batches, lr=1e-3):
            opt = torch.optim.Adam(model.parameters(), lr=lr)
            for xb, yb in batches:
                opt.zero_grad()
                nn.functional.mse_loss(model(xb), yb).backward()
                opt.step()
            return model, opt.state
        model = Net()
        for epoch in range(3):
            _, state = train_epoch(model, [(x, y), (x, y)])
        """, "GT436", 2, holds="state[model.a.weight]['step'] == 2"),
    Shape("""
        class Mapper:
            def __init__(self):
                self.emb = nn.Parameter(torch.randn(5, 3))
                self.net = Net()
            def adjust(self, idx, target, iters=2):
                groups = [{"params": self.emb}, {"params": self.net.parameters()}]
                optim = torch.optim.Adam(groups, lr=1e-2)
                for _ in range(iters):
                    optim.zero_grad()
                    nn.functional.mse_loss(self.net(self.emb[idx]), target).backward()
                    optim.step()
                self.state = optim.state
        mapper = Mapper()
        for frame in range(3):
            mapper.adjust(torch.tensor([0, 1]), torch.randn(2, 1))
        """, "GT436", 7, holds="mapper.state[mapper.emb]['step'] == 2"),
    Shape("""
        def fit(model, batches):
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            for xb, yb in batches:
                opt.zero_grad()
                nn.functional.mse_loss(model(xb), yb).backward()
                opt.step()
            return opt.state
        for fold in range(3):
            model = Net()
            state = fit(model, [(x, y), (x, y)])
        """, "GT436", holds="state[model.a.weight]['step'] == 2"),
    # GT437: the generator's loss steps the discriminator's optimizer (dict, attributes)
    Shape("""
        class GAN(nn.Module):
            def __init__(self):
                super().__init__()
                self.generator, self.discriminator = nn.Linear(3, 3), nn.Linear(3, 1)
                self.optimizer = {
                    "generator": torch.optim.Adam(self.generator.parameters(), lr=1e-2),
                    "discriminator": torch.optim.Adam(self.discriminator.parameters(), lr=1e-2),
                }
            def train_step(self, real):
                fake = self.generator(torch.randn(8, 3))
                g_loss = -self.discriminator(fake).mean()
                self.optimizer["generator"].zero_grad()
                g_loss.backward()
                self.optimizer["discriminator"].step()
                d_loss = self.discriminator(fake.detach()).mean() - self.discriminator(real).mean()
                self.optimizer["discriminator"].zero_grad()
                d_loss.backward()
                self.optimizer["discriminator"].step()
        gan = GAN()
        before = gan.generator.weight.detach().clone()
        for _ in range(3):
            gan.train_step(x)
        """, "GT437", 14, holds="torch.equal(before, gan.generator.weight)"),
    Shape("""
        G, D = nn.Linear(3, 3), nn.Linear(3, 1)
        opt_g = torch.optim.Adam(G.parameters(), lr=1e-2)
        opt_d = torch.optim.Adam(D.parameters(), lr=1e-2)
        before = G.weight.detach().clone()
        for _ in range(3):
            opt_g.zero_grad()
            (-D(G(x)).mean()).backward()
            opt_d.step()
        """, "GT437", 8, holds="torch.equal(before, G.weight)"),
    Shape("""
        G, D = nn.Linear(3, 3), nn.Linear(3, 1)
        opt_g = torch.optim.Adam(G.parameters(), lr=1e-2)
        opt_d = torch.optim.Adam(D.parameters(), lr=1e-2)
        before = G.weight.detach().clone()
        for _ in range(3):
            opt_d.zero_grad()
            (D(G(x).detach()).mean()).backward()
            opt_d.step()
            opt_g.zero_grad()
            (-D(G(x)).mean()).backward()
            opt_g.step()
        """, "GT437", holds="not torch.equal(before, G.weight)"),
    # GT404: a function of the file swaps submodules of the model after the optimizer
    Shape("""
        class Fixer:
            @staticmethod
            def fix(module):
                for name, child in module.named_children():
                    if isinstance(child, nn.Linear) and child.out_features == 1:
                        setattr(module, name, nn.Linear(child.in_features, 1))
                return module
        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model = Fixer.fix(model)
        before = model.b.weight.detach().clone()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        """, "GT404", 10, holds="torch.equal(before, model.b.weight)"),
    Shape("""
        def to_groupnorm(net):
            for name, child in net.named_children():
                if isinstance(child, nn.BatchNorm1d):
                    setattr(net, name, nn.GroupNorm(1, child.num_features))
        model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        to_groupnorm(model)
        before = model[1].weight.detach().clone()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        """, "GT404", 7, holds="torch.equal(before, model[1].weight)"),
    Shape("""
        def to_groupnorm(net):
            for name, child in net.named_children():
                if isinstance(child, nn.BatchNorm1d):
                    setattr(net, name, nn.GroupNorm(1, child.num_features))
        model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 1))
        to_groupnorm(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        before = model[1].weight.detach().clone()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        """, "GT404", holds="not torch.equal(before, model[1].weight)"),
    # GT438: a module with parameters runs in the loop but is in no optimizer
    Shape("""
        class HeadLoss(nn.Module):
            def __init__(self):
                super().__init__()
                self.classifier = nn.Linear(1, 1)
            def forward(self, out, target):
                return nn.functional.mse_loss(self.classifier(out), target)
        model = Net()
        loss_fn = HeadLoss()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        before = loss_fn.classifier.weight.detach().clone()
        for epoch in range(3):
            loss = loss_fn(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """, "GT438", 9, holds="torch.equal(before, loss_fn.classifier.weight)"),
    Shape("""
        seen = []
        def train(loader, epochs=2):
            model = Net()
            proj = nn.Linear(1, 1)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            w = proj.weight.detach().clone()
            for _ in range(epochs):
                for xb, yb in loader:
                    opt.zero_grad()
                    nn.functional.mse_loss(proj(model(xb)), yb).backward()
                    opt.step()
            seen.append(proj.weight.grad is not None and torch.equal(w, proj.weight))
        train([(x, y)])
        """, "GT438", 5, holds="seen == [True]"),
    Shape("""
        model, head = Net(), nn.Linear(1, 1)
        optimizer = torch.optim.Adam(list(model.parameters()) + list(head.parameters()))
        teacher = Net()
        teacher.load_state_dict(model.state_dict())
        before = head.weight.detach().clone()
        for epoch in range(3):
            with torch.no_grad():
                soft = teacher(x)
            loss = nn.functional.mse_loss(head(model(x)), soft)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """, "GT438", holds="not torch.equal(before, head.weight)"),
    # GT439: the EMA copy handed in the model's place
    Shape("""
        import copy
        def train(netG, netG_ema, opt, steps=3):
            for _ in range(steps):
                opt.zero_grad()
                nn.functional.mse_loss(netG(x), y).backward()
                opt.step()
        netG = Net()
        netG_ema = copy.deepcopy(netG)
        opt = torch.optim.Adam(netG.parameters(), lr=1e-2)
        before = netG.a.weight.detach().clone()
        train(netG_ema, netG, opt)
        """, "GT439", 11, holds="torch.equal(before, netG.a.weight)"),
    Shape("""
        import copy
        def train(netG, netG_ema, opt, steps=3):
            for _ in range(steps):
                opt.zero_grad()
                nn.functional.mse_loss(netG(x), y).backward()
                opt.step()
        netG = Net()
        netG_ema = copy.deepcopy(netG)
        opt = torch.optim.Adam(netG.parameters(), lr=1e-2)
        before = netG.a.weight.detach().clone()
        train(netG, netG_ema, opt)
        """, "GT439", holds="not torch.equal(before, netG.a.weight)"),
]


@pytest.mark.parametrize("shape", SHAPES, ids=[f"{s.code}-{i}" for i, s in enumerate(SHAPES)])
def test_shape_on_checker_and_torch(shape: Shape) -> None:
    judge(PRELUDE, shape)
