"""Training-loop order and graph lifetime (GT5xx): the finding sits on the line the user must
change (the real-world cases' ROOT convention), each shape next to a silent look-alike, and
every snippet is *run* on real torch: the look-alike trains, the buggy twin raises or shows the
silent symptom the message claims."""
from __future__ import annotations

import textwrap
from typing import NamedTuple

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

PRELUDE = """
import torch
import torch.nn as nn
torch.manual_seed(0)
"""
SECOND_TIME = "Trying to backward through the graph a second time"
GRAD_NORM_ABOVE = "sum(p.grad.norm() ** 2 for p in model.parameters()) ** 0.5 > 0.01"


class Case(NamedTuple):
    src: str
    found: list[tuple[int, str]]  # (line after the prelude, code); [] for a look-alike
    raises: str | None = None     # what real torch raises
    holds: str | None = None      # true after running it (the symptom, or that it trained)


CASES = {
    # GAN / encoder-discriminator: one optimizer is cleared, the other never is
    "second-optimizer-never-cleared-script": Case("""
        enc, disc = nn.Linear(4, 4), nn.Linear(4, 1)
        opt_e = torch.optim.SGD(enc.parameters(), lr=0.1)
        opt_d = torch.optim.SGD(disc.parameters(), lr=0.1)
        x = torch.randn(3, 4)
        grads = []
        for it in range(3):
            d_loss = disc(enc(x).detach()).mean()
            d_loss.backward()
            grads.append(disc.bias.grad.clone())
            opt_d.step()
            opt_e.zero_grad()
            e_loss = (enc(x) - x).pow(2).mean()
            e_loss.backward()
            opt_e.step()
        """, [(8, "GT501")], holds="torch.allclose(grads[2], torch.full((1,), 3.0))"),
    "second-optimizer-never-cleared-method": Case("""
        class GanTrainer:
            def __init__(self):
                self.G, self.D = nn.Linear(4, 4), nn.Linear(4, 1)
                self.opt_g = torch.optim.Adam(self.G.parameters())
                self.opt_d = torch.optim.Adam(self.D.parameters())

            def fit(self, batches):
                for x in batches:
                    fake = self.G(x)
                    d_loss = self.D(fake.detach()).mean() - self.D(x).mean()
                    d_loss.backward()
                    self.opt_d.step()
                    self.opt_g.zero_grad()
                    g_loss = -self.D(fake).mean()
                    g_loss.backward()
                    self.opt_g.step()
        t = GanTrainer()
        t.fit([torch.randn(3, 4)] * 3)
        """, [(11, "GT501")]),
    "second-optimizer-cleared-by-a-joint-optimizer-ok": Case("""
        enc, disc = nn.Linear(4, 4), nn.Linear(4, 1)
        opt_all = torch.optim.SGD(list(enc.parameters()) + list(disc.parameters()), lr=0.1)
        opt_d = torch.optim.SGD(disc.parameters(), lr=0.1)
        x = torch.randn(3, 4)
        for it in range(3):
            opt_all.zero_grad()
            d_loss = disc(enc(x).detach()).mean()
            d_loss.backward()
            opt_d.step()
            e_loss = (enc(x) - x).pow(2).mean()
            e_loss.backward()
            opt_all.step()
        """, []),
    "second-optimizer-cleared-through-its-module-ok": Case("""
        enc, disc = nn.Linear(4, 4), nn.Linear(4, 1)
        opt_e = torch.optim.SGD(enc.parameters(), lr=0.1)
        opt_d = torch.optim.SGD(disc.parameters(), lr=0.1)
        x = torch.randn(3, 4)
        for it in range(3):
            disc.zero_grad()
            d_loss = disc(enc(x).detach()).mean()
            d_loss.backward()
            opt_d.step()
            opt_e.zero_grad()
            e_loss = (enc(x) - x).pow(2).mean()
            e_loss.backward()
            opt_e.step()
        """, []),
    # DCGAN: D(fake) without detach in a discriminator step split into two backward calls
    "gan-fake-not-detached-split-d-step": Case("""
        netG, netD = nn.Sequential(nn.Linear(2, 4), nn.Tanh()), nn.Linear(4, 1)
        opt_d = torch.optim.SGD(netD.parameters(), lr=0.1)
        opt_g = torch.optim.SGD(netG.parameters(), lr=0.1)
        for real in [torch.randn(3, 4)] * 2:
            opt_d.zero_grad()
            netD(real).mean().backward()
            fake = netG(torch.randn(3, 2))
            err_fake = netD(fake).mean()
            err_fake.backward()
            opt_d.step()
            opt_g.zero_grad()
            err_g = -netD(fake).mean()
            err_g.backward()
            opt_g.step()
        """, [(8, "GT508")], raises=SECOND_TIME),
    "gan-fake-detached-split-d-step-ok": Case("""
        netG, netD = nn.Sequential(nn.Linear(2, 4), nn.Tanh()), nn.Linear(4, 1)
        opt_d = torch.optim.SGD(netD.parameters(), lr=0.1)
        opt_g = torch.optim.SGD(netG.parameters(), lr=0.1)
        for real in [torch.randn(3, 4)] * 2:
            opt_d.zero_grad()
            netD(real).mean().backward()
            fake = netG(torch.randn(3, 2))
            err_fake = netD(fake.detach()).mean()
            err_fake.backward()
            opt_d.step()
            opt_g.zero_grad()
            err_g = -netD(fake).mean()
            err_g.backward()
            opt_g.step()
        """, []),
    # two outputs of one forward call, each backwarded: the first backward frees the graph
    "two-outputs-of-one-call-two-backwards": Case("""
        class Disc(nn.Module):
            def __init__(self):
                super().__init__()
                self.body, self.out = nn.Linear(4, 8), nn.Linear(8, 1)
            def forward(self, x):
                phi = torch.tanh(self.body(x))
                return self.out(phi), phi
        netD = Disc()
        pred, phi = netD(torch.randn(3, 4))
        (-pred.mean()).backward()
        phi.pow(2).mean().backward()
        """, [(10, "GT509")], raises=SECOND_TIME),
    "two-outputs-of-one-call-one-backward-ok": Case("""
        class Disc(nn.Module):
            def __init__(self):
                super().__init__()
                self.body, self.out = nn.Linear(4, 8), nn.Linear(8, 1)
            def forward(self, x):
                phi = torch.tanh(self.body(x))
                return self.out(phi), phi
        netD = Disc()
        pred, phi = netD(torch.randn(3, 4))
        (-pred.mean() + phi.pow(2).mean()).backward()
        """, []),
    "model-tuple-losses-rebound-then-two-backwards": Case("""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.gen, self.enc = nn.Linear(4, 4), nn.Linear(4, 4)
            def forward(self, z):
                img = self.gen(z)
                return img.pow(2), (self.enc(img) - z).pow(2)
        model = Model()
        adv_loss, rec_loss = model(torch.randn(3, 4))
        adv_loss = adv_loss.mean()
        rec_loss = rec_loss.mean()
        adv_loss.backward()
        (rec_loss * 0.5).backward()
        """, [(12, "GT509")], raises=SECOND_TIME),
    # gradient accumulation: a step every `accum` passes
    "accumulation-cleared-every-pass-script": Case("""
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y, accum = torch.randn(3, 4), torch.randn(3, 1), 2
        single = torch.autograd.grad(nn.functional.mse_loss(model(x), y) / accum, model.weight)[0]
        grads = []
        for i, (xb, yb) in enumerate([(x, y)] * 4):
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(xb), yb) / accum
            loss.backward()
            if (i + 1) % accum == 0:
                grads.append(model.weight.grad.clone())
                opt.step()
        """, [(7, "GT512")], holds="torch.allclose(grads[0], single)"),
    "accumulation-cleared-every-pass-method": Case("""
        class Trainer:
            def __init__(self, model, accum_steps):
                self.model, self.accum_steps = model, accum_steps
                self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

            def train_epoch(self, loader):
                for step, (x, y) in enumerate(loader):
                    do_step = (step + 1) % self.accum_steps == 0
                    self.optimizer.zero_grad(set_to_none=True)
                    loss = nn.functional.mse_loss(self.model(x), y)
                    (loss / self.accum_steps).backward()
                    if do_step:
                        self.optimizer.step()
        Trainer(nn.Linear(4, 1), 2).train_epoch([(torch.randn(3, 4), torch.randn(3, 1))] * 4)
        """, [(9, "GT512")]),
    "accumulation-cleared-after-the-step-ok": Case("""
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y, accum = torch.randn(3, 4), torch.randn(3, 1), 2
        single = torch.autograd.grad(nn.functional.mse_loss(model(x), y) / accum, model.weight)[0]
        grads = []
        for i, (xb, yb) in enumerate([(x, y)] * 4):
            loss = nn.functional.mse_loss(model(xb), yb) / accum
            loss.backward()
            if (i + 1) % accum == 0:
                grads.append(model.weight.grad.clone())
                opt.step()
                opt.zero_grad()
        """, [], holds="torch.allclose(grads[0], 2 * single)"),
    "accumulation-loss-not-divided-script": Case("""
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y, accum_iter = torch.randn(3, 4), torch.randn(3, 1), 2
        single = torch.autograd.grad(nn.functional.mse_loss(model(x), y), model.weight)[0]
        grads = []
        for i, (xb, yb) in enumerate([(x, y)] * 4):
            out = model(xb)
            loss = nn.functional.mse_loss(out, yb)
            loss.backward()
            if (i + 1) % accum_iter == 0:
                grads.append(model.weight.grad.clone())
                opt.step()
                opt.zero_grad()
        """, [(9, "GT513")], holds="torch.allclose(grads[0], 2 * single)"),
    "accumulation-loss-not-divided-method": Case("""
        class Trainer:
            def __init__(self, model, grad_accum):
                self.model, self.grad_accum = model, grad_accum
                self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
                self.scaler = torch.amp.GradScaler("cpu", enabled=False)

            def train_epoch(self, loader):
                self.opt.zero_grad()
                for it, (x, y) in enumerate(loader):
                    loss = nn.functional.mse_loss(self.model(x), y)
                    self.scaler.scale(loss).backward()
                    if (it + 1) % self.grad_accum == 0:
                        self.scaler.step(self.opt)
                        self.scaler.update()
                        self.opt.zero_grad()
        Trainer(nn.Linear(4, 1), 2).train_epoch([(torch.randn(3, 4), torch.randn(3, 1))] * 4)
        """, [(11, "GT513")]),
    "accumulation-loss-divided-in-a-method-ok": Case("""
        class Trainer:
            def __init__(self, model, accum_steps):
                self.model, self.accum_steps = model, accum_steps
                self.opt = torch.optim.SGD(model.parameters(), lr=0.1)

            def compute_loss(self, batch):
                x, y = batch
                return nn.functional.mse_loss(self.model(x), y) / self.accum_steps

            def step_all(self, loader):
                for i, batch in enumerate(loader, 1):
                    self.compute_loss(batch).backward()
                    if i % self.accum_steps == 0:
                        self.opt.step()
                        self.opt.zero_grad(set_to_none=True)
        Trainer(nn.Linear(4, 1), 2).step_all([(torch.randn(3, 4), torch.randn(3, 1))] * 4)
        """, []),
    "accumulation-loss-divided-by-another-attribute": Case("""
        class Trainer:
            def __init__(self, model, accum_steps):
                self.model, self.accum_steps, self.tau = model, accum_steps, 2.0
                self.opt = torch.optim.SGD(model.parameters(), lr=0.1)

            def compute_loss(self, batch):
                x, y = batch
                return nn.functional.mse_loss(self.model(x), y) / self.tau

            def step_all(self, loader):
                for i, batch in enumerate(loader, 1):
                    loss = self.compute_loss(batch)
                    loss.backward()
                    if i % self.accum_steps == 0:
                        self.opt.step()
                        self.opt.zero_grad(set_to_none=True)
        Trainer(nn.Linear(4, 1), 2).step_all([(torch.randn(3, 4), torch.randn(3, 1))] * 4)
        """, [(13, "GT513")]),
    "state-carried-one-backward-per-episode-ok": Case("""
        class Bot(nn.Module):
            def __init__(self):
                super().__init__()
                self.cell = nn.GRUCell(4, 8)
                self.head = nn.Linear(8, 1)
                self.state = None

            def observe(self, x):
                self.state = self.cell(x, self.state)
        bot = Bot()
        opt = torch.optim.SGD(bot.parameters(), lr=0.1)
        loss = 0
        for _ in range(3):
            bot.observe(torch.randn(2, 4))
            loss = loss + bot.head(bot.state).pow(2).mean()
        loss.backward()
        opt.step()
        """, [], holds="bot.cell.weight_hh.grad is not None"),
    "state-carried-backward-every-round": Case("""
        class Bot(nn.Module):
            def __init__(self):
                super().__init__()
                self.cell = nn.GRUCell(4, 8)
                self.head = nn.Linear(8, 1)
                self.state = None

            def observe(self, x):
                self.state = self.cell(x, self.state)
        bot = Bot()
        opt = torch.optim.SGD(bot.parameters(), lr=0.1)
        for _ in range(3):
            bot.observe(torch.randn(2, 4))
            opt.zero_grad()
            bot.head(bot.state).pow(2).mean().backward()
            opt.step()
        """, [(9, "GT528")], raises=SECOND_TIME),
    "accumulation-loss-divided-in-place-ok": Case("""
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y, accum_iter = torch.randn(3, 4), torch.randn(3, 1), 2
        for i, (xb, yb) in enumerate([(x, y)] * 4):
            loss = nn.functional.mse_loss(model(xb), yb)
            loss /= accum_iter
            loss.backward()
            if (i + 1) % accum_iter == 0:
                opt.step()
                opt.zero_grad()
        """, []),
    "accumulation-loss-scaled-by-a-helper-ok": Case("""
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        def compute_loss(out, y, steps):
            return nn.functional.mse_loss(out, y) / steps
        x, y, accum_iter = torch.randn(3, 4), torch.randn(3, 1), 2
        for i, (xb, yb) in enumerate([(x, y)] * 4):
            loss = compute_loss(model(xb), yb, accum_iter)
            loss.backward()
            if (i + 1) % accum_iter == 0:
                opt.step()
                opt.zero_grad()
        """, []),
    # clipping before backward(): the step applies unclipped gradients
    "clip-before-backward-inline": Case("""
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in [(torch.randn(3, 4) * 9, torch.randn(3, 1))] * 2:
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.001)
            loss.backward()
            opt.step()
        """, [(6, "GT514")], holds=GRAD_NORM_ABOVE),
    "clip-in-training-step-before-callers-backward": Case("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 1)
            def training_step(self, batch):
                loss = nn.functional.mse_loss(self.fc(batch[0]), batch[1])
                nn.utils.clip_grad_norm_(self.parameters(), 0.001)
                return loss
        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for batch in [(torch.randn(3, 4) * 9, torch.randn(3, 1))] * 2:
            opt.zero_grad()
            out = model.training_step(batch)
            out.backward()
            opt.step()
        """, [(7, "GT514")], holds=GRAD_NORM_ABOVE),
    "clip-in-a-loss-helper-before-backward": Case("""
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        def compute_loss(x, y):
            loss = nn.functional.mse_loss(model(x), y)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.001)
            return loss
        def train(batches):
            for x, y in batches:
                opt.zero_grad()
                loss = compute_loss(x, y) * 2
                loss.backward()
                opt.step()
        train([(torch.randn(3, 4) * 9, torch.randn(3, 1))] * 2)
        """, [(5, "GT514")], holds=GRAD_NORM_ABOVE),
    "clip-in-a-helper-called-after-backward-ok": Case("""
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        def clip_and_norm():
            return torch.nn.utils.clip_grad_norm_(model.parameters(), 0.001)
        for x, y in [(torch.randn(3, 4) * 9, torch.randn(3, 1))] * 2:
            opt.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            norm = clip_and_norm()
            opt.step()
        """, [], holds="not " + GRAD_NORM_ABOVE),
    # a learning-rate scheduler stepped before its optimizer ever stepped
    "scheduler-at-epoch-start": Case("""
        import warnings
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.1)
        lrs = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for epoch in range(2):
                sched.step()
                for x, y in [(torch.randn(3, 4), torch.randn(3, 1))] * 2:
                    lrs.append(opt.param_groups[0]["lr"])
                    opt.zero_grad()
                    nn.functional.mse_loss(model(x), y).backward()
                    opt.step()
        """, [(9, "GT515")], holds="lrs[0] == 0.1 and any('before `optimizer.step()`' in str(w.message) for w in caught)"),
    "scheduler-before-a-training-method": Case("""
        class Runner:
            def __init__(self, model):
                self.model = model
                self.optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
                self.lr_scheduler = torch.optim.lr_scheduler.ExponentialLR(self.optimizer, 0.5)

            def train_epoch(self, loader, optimizer):
                for x, y in loader:
                    optimizer.zero_grad()
                    nn.functional.mse_loss(self.model(x), y).backward()
                    optimizer.step()

            def fit(self, loader, epochs):
                for epoch in range(epochs):
                    self.lr_scheduler.step()
                    self.train_epoch(loader, self.optimizer)
        r = Runner(nn.Linear(4, 1))
        r.fit([(torch.randn(3, 4), torch.randn(3, 1))], 2)
        """, [(15, "GT515")], holds="r.optimizer.param_groups[0]['lr'] == 0.25"),
    "scheduler-after-the-epoch-ok": Case("""
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.1)
        lrs = []
        for epoch in range(2):
            for x, y in [(torch.randn(3, 4), torch.randn(3, 1))] * 2:
                lrs.append(opt.param_groups[0]["lr"])
                opt.zero_grad()
                nn.functional.mse_loss(model(x), y).backward()
                opt.step()
            sched.step()
        """, [], holds="lrs[0] == 1.0"),
    "scheduler-with-an-epoch-argument-ok": Case("""
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt)
        val = 1.0
        for epoch in range(2):
            sched.step(val)
            for x, y in [(torch.randn(3, 4), torch.randn(3, 1))] * 2:
                opt.zero_grad()
                loss = nn.functional.mse_loss(model(x), y)
                loss.backward()
                opt.step()
            val = loss.item()
        """, []),
    # an evaluation at the end of each epoch leaves the model in eval mode for training
    "eval-mode-left-by-a-validate-method": Case("""
        class Trainer:
            def __init__(self):
                self.model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 1))
                self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
                self.modes = []

            def validate(self, x):
                self.model.eval()
                with torch.no_grad():
                    return self.model(x).mean().item()

            def fit(self, batches, epochs):
                self.model.train()
                for epoch in range(epochs):
                    for x, y in batches:
                        self.modes.append(self.model.training)
                        self.optimizer.zero_grad()
                        nn.functional.mse_loss(self.model(x), y).backward()
                        self.optimizer.step()
                    self.validate(x)
        t = Trainer()
        t.fit([(torch.randn(4, 4), torch.randn(4, 1))] * 2, 2)
        """, [(13, "GT516")], holds="t.modes == [True, True, False, False]"),
    "eval-mode-left-inline-script": Case("""
        model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model.train()
        modes = []
        for epoch in range(2):
            for x, y in [(torch.randn(4, 4), torch.randn(4, 1))] * 2:
                modes.append(model.training)
                opt.zero_grad()
                nn.functional.mse_loss(model(x), y).backward()
                opt.step()
            model.eval()
            val = model(x).mean().item()
        """, [(3, "GT516")], holds="modes == [True, True, False, False]"),
    "eval-helper-restores-train-mode-ok": Case("""
        model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        def evaluate(net, x):
            net.eval()
            with torch.no_grad():
                out = net(x).mean().item()
            net.train()
            return out
        model.train()
        modes = []
        for epoch in range(2):
            for x, y in [(torch.randn(4, 4), torch.randn(4, 1))] * 2:
                modes.append(model.training)
                opt.zero_grad()
                nn.functional.mse_loss(model(x), y).backward()
                opt.step()
            evaluate(model, x)
        """, [], holds="all(modes)"),
    "submodule-kept-in-eval-by-the-training-step-ok": Case("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8))
                self.head = nn.Linear(8, 1)

            def forward(self, x):
                return self.head(self.backbone(x))

            def training_step(self, x, y):
                self.backbone.eval()
                return nn.functional.mse_loss(self(x), y)
        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model.train()
        for i in range(2):
            opt.zero_grad()
            loss = model.training_step(torch.randn(4, 4), torch.randn(4, 1))
            loss.backward()
            opt.step()
        """, [], holds="model.training and not model.backbone.training"),
    "eval-mode-on-a-model-without-mode-layers-ok": Case("""
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model.train()
        for epoch in range(2):
            for x, y in [(torch.randn(4, 4), torch.randn(4, 1))] * 2:
                opt.zero_grad()
                nn.functional.mse_loss(model(x), y).backward()
                opt.step()
            model.eval()
        """, []),
    "train-one-epoch-sets-train-mode-ok": Case("""
        model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        def train_one_epoch(net, batches):
            net.train()
            for x, y in batches:
                opt.zero_grad()
                nn.functional.mse_loss(net(x), y).backward()
                opt.step()
        model.train()
        for epoch in range(2):
            train_one_epoch(model, [(torch.randn(4, 4), torch.randn(4, 1))] * 2)
            model.eval()
        """, []),
}


def _source(case: Case) -> str:
    return PRELUDE + textwrap.dedent(case.src).lstrip("\n")


@pytest.mark.parametrize("name", sorted(CASES))
def test_finding_on_the_root_line_and_torch_agrees(name: str) -> None:
    case = CASES[name]
    offset = PRELUDE.count("\n")
    found = sorted((f.line - offset, f.code) for f in check_source(_source(case), "case.py")
                   if f.code.startswith("GT5"))
    assert found == case.found
    env: dict = {}
    if case.raises:
        with pytest.raises(RuntimeError, match=case.raises):
            exec(compile(_source(case), "case.py", "exec"), env)
    else:
        exec(compile(_source(case), "case.py", "exec"), env)
    if case.holds:
        assert eval(case.holds, env)
