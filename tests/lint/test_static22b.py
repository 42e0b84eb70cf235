"""Readings of docs/triage/static22b.md, written from each mechanism's sentence before reading
the code of the case it came from: buggy twins in several shapes (a script, a method of a
trainer class, a helper one call away, a Lightning module, another spelling of the API) that
real torch shows wrong, and correct look-alikes of the same shape that run; the checker reports
the first and stays silent on the second. The distributed shapes run on one gloo rank: enough
to show a collective's result is a new tensor (GT465) and that DDP's communication hook never
runs when the forward bypasses the wrapper (GT453)."""
from __future__ import annotations

import os
import tempfile

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

# one gloo rank, started once per process (the file store is created by the fixture)
DIST = PRELUDE + '''
import torch.distributed as dist
import torch.distributed.nn
from torch.nn.parallel import DistributedDataParallel as DDP
hooked = []
def count_hook(state, bucket):
    hooked.append(1)
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut
'''

NONE_GRAD = (AttributeError, "'NoneType' object has no attribute")


@pytest.fixture(scope="module")
def one_rank():
    import torch.distributed as dist
    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    if not dist.is_initialized():
        fd, path = tempfile.mkstemp(prefix="gt22b-store-")
        os.close(fd)
        os.unlink(path)
        dist.init_process_group("gloo", init_method=f"file://{path}", rank=0, world_size=1)
    yield
    if dist.is_initialized():
        dist.destroy_process_group()


SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT753, mechanism: the square root of a sum of squared differences without an epsilon, in
    # a helper reached from a loss class's method (the triplet loss's distance metric): a pair
    # of equal embeddings gives a NaN gradient. Look-alike: torch.linalg.vector_norm
    "sqrt-distance-in-helper-of-loss-class-method": (Shape("""
        def euclid(a, b):
            return torch.linalg.vector_norm(a - b, dim=-1)
        class MarginLoss(nn.Module):
            def __init__(self, margin=1.0):
                super().__init__()
                self.margin = margin
            def dist(self, x, y):
                return euclid(x, y)
            def forward(self, a, p, n):
                return F.relu(self.dist(a, p) - self.dist(a, n) + self.margin).mean()
        enc = nn.Linear(4, 3)
        x = torch.randn(5, 4)
        MarginLoss()(enc(x), enc(x), enc(torch.randn(5, 4))).backward()
        """, "GT753", holds="not torch.isnan(enc.weight.grad).any()"), Shape("""
        def euclid(a, b):
            return torch.sqrt(torch.sum((a - b) ** 2, dim=-1))
        class MarginLoss(nn.Module):
            def __init__(self, margin=1.0):
                super().__init__()
                self.margin = margin
            def dist(self, x, y):
                return euclid(x, y)
            def forward(self, a, p, n):
                return F.relu(self.dist(a, p) - self.dist(a, n) + self.margin).mean()
        enc = nn.Linear(4, 3)
        x = torch.randn(5, 4)
        MarginLoss()(enc(x), enc(x), enc(torch.randn(5, 4))).backward()
        """, "GT753", 2, holds="torch.isnan(enc.weight.grad).all()")),
    # GT753, a Lightning training_step two helpers above the root (the loss Lightning
    # backpropagates is what training_step returns). Look-alike: the epsilon under the root
    "sqrt-distance-two-helpers-below-training-step": (Shape("""
        import lightning as L
        def gap(a, b):
            return torch.sqrt(((a - b) ** 2).sum(1) + 1e-12)
        class Siamese(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.enc = nn.Linear(4, 2)
            def similarity(self, a, b):
                return -gap(self.enc(a), self.enc(b))
            def training_step(self, batch, idx):
                a, b, y = batch
                return ((self.similarity(a, b) - y) ** 2).mean()
        m = Siamese()
        a = torch.randn(3, 4)
        m.training_step((a, a.clone(), torch.zeros(3)), 0).backward()
        """, "GT753", holds="torch.isfinite(m.enc.weight.grad).all()"), Shape("""
        import lightning as L
        def gap(a, b):
            return torch.sqrt(((a - b) ** 2).sum(1))
        class Siamese(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.enc = nn.Linear(4, 2)
            def similarity(self, a, b):
                return -gap(self.enc(a), self.enc(b))
            def training_step(self, batch, idx):
                a, b, y = batch
                return ((self.similarity(a, b) - y) ** 2).mean()
        m = Siamese()
        a = torch.randn(3, 4)
        m.training_step((a, a.clone(), torch.zeros(3)), 0).backward()
        """, "GT753", 3, holds="torch.isnan(m.enc.weight.grad).all()")),
    # GT553, mechanism: zero_grad() (set_to_none=True by default) and then an in-place write
    # into `.grad` before any backward fills it. Script loop, preallocated grads, `+=`, the
    # clear at the end of the pass. Look-alike: set_to_none=False
    "grad-added-after-clear-in-script": (Shape("""
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for p in net.parameters():
            p.grad = torch.zeros_like(p)
        for it in range(3):
            g = torch.autograd.grad(net(torch.randn(4, 3)).pow(2).mean(), list(net.parameters()))
            for p, gi in zip(net.parameters(), g):
                p.grad += gi
            opt.step()
            opt.zero_grad(set_to_none=False)
        """, "GT553"), Shape("""
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for p in net.parameters():
            p.grad = torch.zeros_like(p)
        for it in range(3):
            g = torch.autograd.grad(net(torch.randn(4, 3)).pow(2).mean(), list(net.parameters()))
            for p, gi in zip(net.parameters(), g):
                p.grad += gi
            opt.step()
            opt.zero_grad()
        """, "GT553", 10, raises=(TypeError, "NoneType"))),
    # GT553, a trainer's method, the write in a helper function one call away, the module's
    # zero_grad. Look-alike: the helper assigns the gradient
    "grad-copied-by-helper-after-module-clear": (Shape("""
        def add_meta_grads(params, grads):
            for p, g in zip(params, grads):
                p.grad = g.clone()
        class MetaTrainer:
            def __init__(self, model):
                self.model = model
                self.opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            def outer_step(self, x):
                self.model.zero_grad()
                loss = self.model(x).pow(2).mean()
                grads = torch.autograd.grad(loss, list(self.model.parameters()))
                add_meta_grads(self.model.parameters(), grads)
                self.opt.step()
        MetaTrainer(nn.Linear(3, 1)).outer_step(torch.randn(4, 3))
        """, "GT553"), Shape("""
        def add_meta_grads(params, grads):
            for p, g in zip(params, grads):
                p.grad.data.copy_(g)
        class MetaTrainer:
            def __init__(self, model):
                self.model = model
                self.opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            def outer_step(self, x):
                self.model.zero_grad()
                loss = self.model(x).pow(2).mean()
                grads = torch.autograd.grad(loss, list(self.model.parameters()))
                add_meta_grads(self.model.parameters(), grads)
                self.opt.step()
        MetaTrainer(nn.Linear(3, 1)).outer_step(torch.randn(4, 3))
        """, "GT553", 9, raises=NONE_GRAD)),
    # GT553, a distilled-data tensor whose grad is preallocated, set_to_none spelled out, the
    # write in a method; another backward spelling (autograd.grad fills no .grad). Look-alike:
    # the method tests the grad first
    "grad-pushed-by-method-after-explicit-clear": (Shape("""
        class Distiller:
            def __init__(self):
                self.images = torch.randn(4, 3, requires_grad=True)
                self.opt = torch.optim.SGD([self.images], lr=0.1)
            def push(self, g):
                if self.images.grad is None:
                    self.images.grad = torch.zeros_like(self.images)
                self.images.grad.add_(g)
            def train(self, net):
                for _ in range(2):
                    self.opt.zero_grad(set_to_none=True)
                    g, = torch.autograd.grad(net(self.images).sum(), self.images)
                    self.push(g)
                    self.opt.step()
        Distiller().train(nn.Linear(3, 1))
        """, "GT553"), Shape("""
        class Distiller:
            def __init__(self):
                self.images = torch.randn(4, 3, requires_grad=True)
                self.images.grad = torch.zeros_like(self.images)
                self.opt = torch.optim.SGD([self.images], lr=0.1)
            def push(self, g):
                self.images.grad.add_(g)
            def train(self, net):
                for _ in range(2):
                    self.opt.zero_grad(set_to_none=True)
                    g, = torch.autograd.grad(net(self.images).sum(), self.images)
                    self.push(g)
                    self.opt.step()
        Distiller().train(nn.Linear(3, 1))
        """, "GT553", 10, raises=NONE_GRAD)),
    # GT553, the write is early in a pass whose backward comes after it (reported at the
    # write). Look-alike: the rescale after the backward
    "grad-rescaled-before-backward": (Shape("""
        net, centers = nn.Linear(4, 2), nn.Linear(2, 2)
        opt = torch.optim.SGD([*net.parameters(), *centers.parameters()], lr=0.1)
        for step in range(2):
            loss = centers(net(torch.randn(8, 4))).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            for p in centers.parameters():
                p.grad.data *= 0.5
            opt.step()
        """, "GT553"), Shape("""
        net, centers = nn.Linear(4, 2), nn.Linear(2, 2)
        opt = torch.optim.SGD([*net.parameters(), *centers.parameters()], lr=0.1)
        for step in range(2):
            loss = centers(net(torch.randn(8, 4))).pow(2).mean()
            opt.zero_grad()
            for p in centers.parameters():
                p.grad.data *= 0.5
            loss.backward()
            opt.step()
        """, "GT553", 7, raises=NONE_GRAD)),
    # GT541, mechanism: one forward serves the training and the evaluation phase (only the
    # backward/step are guarded by the phase) and nothing puts the model in eval mode. A
    # script's loop over phases with set_grad_enabled (the tutorial spelling) and batch norm.
    # Look-alike: the mode follows the phase
    "phase-loop-without-eval": (Shape("""
        model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 3))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        loaders = {"train": [(torch.randn(6, 4), torch.randint(0, 3, (6,)))],
                   "val": [(torch.randn(6, 4) + 5, torch.randint(0, 3, (6,)))]}
        stats = {}
        for phase in ["train", "val"]:
            model.train(phase == "train")
            for inputs, labels in loaders[phase]:
                optimizer.zero_grad()
                with torch.set_grad_enabled(phase == "train"):
                    loss = F.cross_entropy(model(inputs), labels)
                    if phase == "train":
                        loss.backward()
                        optimizer.step()
            stats[phase] = model[1].running_mean.clone()
        """, "GT541", holds="torch.equal(stats['train'], stats['val'])"), Shape("""
        model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 3))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        loaders = {"train": [(torch.randn(6, 4), torch.randint(0, 3, (6,)))],
                   "val": [(torch.randn(6, 4) + 5, torch.randint(0, 3, (6,)))]}
        stats = {}
        for phase in ["train", "val"]:
            for inputs, labels in loaders[phase]:
                optimizer.zero_grad()
                with torch.set_grad_enabled(phase == "train"):
                    loss = F.cross_entropy(model(inputs), labels)
                    if phase == "train":
                        loss.backward()
                        optimizer.step()
            stats[phase] = model[1].running_mean.clone()
        """, "GT541", 7, holds="not torch.equal(stats['train'], stats['val'])")),
    # GT541, a trainer method given a flag, with an unconditional train() at its top.
    # Look-alike: train(training)
    "epoch-method-train-mode-for-validation": (Shape("""
        class Trainer:
            def __init__(self):
                self.model = nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.5), nn.Linear(16, 2))
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
            def run_epoch(self, batches, training):
                self.model.train(training)
                total = 0.0
                for x, y in batches:
                    loss = F.cross_entropy(self.model(x), y)
                    if training:
                        self.opt.zero_grad()
                        loss.backward()
                        self.opt.step()
                    total += loss.item()
                return total
        t = Trainer()
        data = [(torch.randn(8, 8), torch.randint(0, 2, (8,)))]
        t.run_epoch(data, True)
        same = t.run_epoch(data, False) == t.run_epoch(data, False)
        """, "GT541", holds="same"), Shape("""
        class Trainer:
            def __init__(self):
                self.model = nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.5), nn.Linear(16, 2))
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
            def run_epoch(self, batches, training):
                self.model.train()
                total = 0.0
                for x, y in batches:
                    loss = F.cross_entropy(self.model(x), y)
                    if training:
                        self.opt.zero_grad()
                        loss.backward()
                        self.opt.step()
                    total += loss.item()
                return total
        t = Trainer()
        data = [(torch.randn(8, 8), torch.randint(0, 2, (8,)))]
        t.run_epoch(data, True)
        same = t.run_epoch(data, False) == t.run_epoch(data, False)
        """, "GT541", 6, holds="not same")),
    # GT541, a step helper one call away given the phase as a string; the look-alike's caller
    # switches modes around the calls
    "shared-step-helper-with-phase": (Shape("""
        def shared_step(model, opt, batch, phase):
            x, y = batch
            loss = F.mse_loss(model(x), y)
            if phase == "train":
                opt.zero_grad()
                loss.backward()
                opt.step()
            return loss.item()
        net = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.3), nn.Linear(8, 1))
        opt = torch.optim.Adam(net.parameters())
        batch = (torch.randn(5, 4), torch.randn(5, 1))
        net.train()
        shared_step(net, opt, batch, "train")
        net.eval()
        same = shared_step(net, opt, batch, "val") == shared_step(net, opt, batch, "val")
        """, "GT541", holds="same"), Shape("""
        def shared_step(model, opt, batch, phase):
            x, y = batch
            loss = F.mse_loss(model(x), y)
            if phase == "train":
                opt.zero_grad()
                loss.backward()
                opt.step()
            return loss.item()
        net = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.3), nn.Linear(8, 1))
        opt = torch.optim.Adam(net.parameters())
        batch = (torch.randn(5, 4), torch.randn(5, 1))
        shared_step(net, opt, batch, "train")
        same = shared_step(net, opt, batch, "val") == shared_step(net, opt, batch, "val")
        """, "GT541", 3, holds="not same")),
    # GT431 wider, mechanism: a freeze loop whose every branch sets requires_grad = False
    # freezes every parameter; an optimizer over them trains nothing. A trainer's __init__
    # under a config flag (look-alike: the else branch unfreezes)
    "freeze-loop-both-branches-false-in-trainer": (Shape("""
        class Trainer:
            def __init__(self, fix_encoder):
                self.model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
                if fix_encoder:
                    for name, p in self.model.named_parameters():
                        if name.startswith("0."):
                            p.requires_grad = False
                        else:
                            p.requires_grad = True
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
            def fit(self, x):
                self.opt.zero_grad()
                self.model(x).sum().backward()
                self.opt.step()
        Trainer(True).fit(torch.randn(3, 4))
        """, "GT431"), Shape("""
        class Trainer:
            def __init__(self, fix_encoder):
                self.model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
                if fix_encoder:
                    for name, p in self.model.named_parameters():
                        if name.startswith("0."):
                            p.requires_grad = False
                        else:
                            p.requires_grad = False
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
            def fit(self, x):
                self.opt.zero_grad()
                self.model(x).sum().backward()
                self.opt.step()
        Trainer(True).fit(torch.randn(3, 4))
        """, "GT431", 9, raises=(RuntimeError, "does not require grad"))),
    # GT431 wider, a script with an if/elif/else over names and the requires_grad_ spelling
    # (look-alike: the last branch keeps the head trainable)
    "freeze-loop-every-branch-in-script": (Shape("""
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        for n, p in model.named_parameters():
            if n.startswith("0."):
                p.requires_grad_(False)
            elif n.endswith("bias"):
                p.requires_grad_(False)
            else:
                p.requires_grad_(True)
        opt = torch.optim.Adam(model.parameters())
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
        """, "GT431"), Shape("""
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        for n, p in model.named_parameters():
            if n.startswith("0."):
                p.requires_grad_(False)
            elif n.endswith("bias"):
                p.requires_grad_(False)
            else:
                p.requires_grad_(False)
        opt = torch.optim.Adam(model.parameters())
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
        """, "GT431", 8, raises=(RuntimeError, "does not require grad"))),
    # GT553 look-alike of another shape: a class's own `zero_grad` (DeepSpeed's clears its
    # fp16 copies) before a write into another tensor's `.grad`; the twin clears the torch
    # optimizer it holds
    "own-zero-grad-method-before-grad-write": (Shape("""
        class Engine:
            def __init__(self, net):
                self.net = net
                self.flat = torch.zeros(3, requires_grad=True)
                self.flat.grad = torch.zeros(3)
                self.opt = torch.optim.SGD([self.flat], lr=0.1)
            def zero_grad(self):
                for p in self.net.parameters():
                    p.grad = None
            def step(self, scale):
                self.zero_grad()
                self.flat.grad.mul_(scale)
                self.opt.step()
        Engine(nn.Linear(2, 2)).step(0.5)
        """, "GT553"), Shape("""
        class Engine:
            def __init__(self, net):
                self.net = net
                self.flat = torch.zeros(3, requires_grad=True)
                self.flat.grad = torch.zeros(3)
                self.opt = torch.optim.SGD([self.flat], lr=0.1)
            def step(self, scale):
                self.opt.zero_grad()
                self.flat.grad.mul_(scale)
                self.opt.step()
        Engine(nn.Linear(2, 2)).step(0.5)
        """, "GT553", 8, raises=NONE_GRAD)),
    # GT541 through a shared fact: a module class of the file built around the module it is
    # given (a loss wrapper holding the network) has that module's batch norm. A step function
    # nested in the builder, `.train()` at its top; look-alike: the given network has no mode
    # layer
    "wrapper-given-batchnorm-net-in-closure-step": (Shape("""
        class Wrapper(nn.Module):
            def __init__(self, model):
                super().__init__()
                self.model = model
            def forward(self, x, y):
                return F.mse_loss(self.model(x), y)
        def make_network():
            backbone = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
            net = Wrapper(backbone)
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            def make_step(x, y, phase):
                model = net.train()
                loss = model(x, y)
                if phase == "train":
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                return loss.item()
            return net, make_step
        net, make_step = make_network()
        make_step(torch.randn(6, 4), torch.randn(6, 1), "val")
        """, "GT541"), Shape("""
        class Wrapper(nn.Module):
            def __init__(self, model):
                super().__init__()
                self.model = model
            def forward(self, x, y):
                return F.mse_loss(self.model(x), y)
        def make_network():
            backbone = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 1))
            net = Wrapper(backbone)
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            def make_step(x, y, phase):
                model = net.train()
                loss = model(x, y)
                if phase == "train":
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                return loss.item()
            return net, make_step
        net, make_step = make_network()
        make_step(torch.randn(6, 4) + 3, torch.randn(6, 1), "val")
        """, "GT541", 12, holds="int(net.model[1].num_batches_tracked) == 1")),
    # GT554, mechanism: other weights (an EMA's shadow) are copied into the trained model's
    # parameters inside the training loop and nothing copies the trained values back. A
    # script, `p.copy_(s)` under no_grad; look-alike: the copy goes to a separate eval model
    "shadow-applied-to-trained-net-in-script": (Shape("""
        class Shadow:
            def __init__(self, params):
                self.shadow = [p.detach().clone() for p in params]
            def apply_shadow(self, params):
                for s, p in zip(self.shadow, params):
                    p.copy_(s)
        net, eval_net = nn.Linear(3, 1), nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        sh = Shadow(net.parameters())
        for i in range(3):
            opt.zero_grad()
            net(torch.randn(2, 3)).sum().backward()
            opt.step()
            with torch.no_grad():
                sh.apply_shadow(eval_net.parameters())
        """, "GT554", holds="not torch.equal(net.weight, sh.shadow[0])"), Shape("""
        class Shadow:
            def __init__(self, params):
                self.shadow = [p.detach().clone() for p in params]
            def apply_shadow(self, params):
                for s, p in zip(self.shadow, params):
                    p.copy_(s)
        net, eval_net = nn.Linear(3, 1), nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        sh = Shadow(net.parameters())
        for i in range(3):
            opt.zero_grad()
            net(torch.randn(2, 3)).sum().backward()
            opt.step()
            with torch.no_grad():
                sh.apply_shadow(net.parameters())
        """, "GT554", 15, holds="torch.equal(net.weight, sh.shadow[0])")),
    # GT554, a trainer's fit loop validating every few steps; look-alike: store, copy, restore
    "ema-copied-for-validation-in-trainer": (Shape("""
        class EMA:
            def __init__(self, params):
                self.shadow = [p.detach().clone() for p in params]
            def copy_to(self, params):
                for s, p in zip(self.shadow, params):
                    p.data.copy_(s)
            def store(self, params):
                self.kept = [p.detach().clone() for p in params]
            def restore(self, params):
                for k, p in zip(self.kept, params):
                    p.data.copy_(k)
        class Trainer:
            def __init__(self):
                self.model = nn.Linear(3, 1)
                self.ema = EMA(self.model.parameters())
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
            def fit(self, steps):
                for i in range(steps):
                    self.opt.zero_grad()
                    self.model(torch.randn(2, 3)).sum().backward()
                    self.opt.step()
                    if i % 2 == 1:
                        self.ema.store(self.model.parameters())
                        self.ema.copy_to(self.model.parameters())
                        self.ema.restore(self.model.parameters())
        t = Trainer()
        t.fit(2)
        """, "GT554", holds="not torch.equal(t.model.weight, t.ema.shadow[0])"), Shape("""
        class EMA:
            def __init__(self, params):
                self.shadow = [p.detach().clone() for p in params]
            def copy_to(self, params):
                for s, p in zip(self.shadow, params):
                    p.data.copy_(s)
        class Trainer:
            def __init__(self):
                self.model = nn.Linear(3, 1)
                self.ema = EMA(self.model.parameters())
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
            def fit(self, steps):
                for i in range(steps):
                    self.opt.zero_grad()
                    self.model(torch.randn(2, 3)).sum().backward()
                    self.opt.step()
                    if i % 2 == 1:
                        self.ema.copy_to(self.model.parameters())
        t = Trainer()
        t.fit(2)
        """, "GT554", 18, holds="torch.equal(t.model.weight, t.ema.shadow[0])")),
}

DIST_SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT465, mechanism: an autograd-aware (out-of-place) collective called for its effect: the
    # result is dropped and the input keeps its local value. A helper, `torch.distributed.nn`
    # spelling; the proof on one rank: the result is a new tensor, the input is not written.
    # Look-alike: the result assigned
    "functional-all-reduce-dropped-in-helper": (Shape("""
        def balance(probs, counts):
            counts = torch.distributed.nn.all_reduce(counts)
            return counts
        c = torch.tensor([1.0, 2.0])
        out = balance(None, c)
        out.add_(1)
        """, "GT465", holds="out is not c and c.tolist() == [1.0, 2.0]"), Shape("""
        def balance(probs, counts):
            torch.distributed.nn.all_reduce(counts)
            return counts
        c = torch.tensor([1.0, 2.0])
        r = torch.distributed.nn.all_reduce(c)
        r.add_(1)
        """, "GT465", 2, holds="r is not c and c.tolist() == [1.0, 2.0]")),
    # GT465, a trainer method, the `functional` module imported under an alias, all_gather.
    # Look-alike: the in-place c10d all_reduce
    "functional-collective-alias-in-method": (Shape("""
        class Stats:
            def sync(self, total):
                dist.all_reduce(total)
                return total
        t = Stats().sync(torch.ones(2))
        """, "GT465"), Shape("""
        import torch.distributed.nn.functional as dfn
        class Stats:
            def sync(self, total):
                dfn.all_reduce(total)
                gathered = dfn.all_gather(total)
                return total
        t = torch.ones(2)
        r = dfn.all_reduce(t)
        """, "GT465", 4, holds="r is not t")),
    # GT453, mechanism: the backpropagated forward runs the module inside a DDP wrapper, reached
    # through the wrapper's `.module`: a self attribute. Proof: DDP's communication hook never
    # runs. Look-alike: the forward through the wrapper, `.module` only for a weight
    "trainer-forward-through-self-model-module": (Shape("""
        class Trainer:
            def __init__(self, net):
                self.model = DDP(net)
                self.model.register_comm_hook(None, count_hook)
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
            def fit(self, x, y):
                out = self.model(x)
                loss = ((out - y) ** 2).mean() + 1e-4 * self.model.module.weight.pow(2).sum()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
        Trainer(nn.Linear(3, 1)).fit(torch.randn(4, 3), torch.randn(4, 1))
        """, "GT453", holds="len(hooked) > 0"), Shape("""
        class Trainer:
            def __init__(self, net):
                self.model = DDP(net)
                self.model.register_comm_hook(None, count_hook)
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
            def fit(self, x, y):
                out = self.model.module(x)
                loss = ((out - y) ** 2).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
        Trainer(nn.Linear(3, 1)).fit(torch.randn(4, 3), torch.randn(4, 1))
        """, "GT453", 7, holds="hooked == []")),
    # GT453, an unwrap helper one call away in a script-like function. Look-alike: the helper
    # only for the saved state dict and a no_grad check
    "forward-through-unwrap-helper": (Shape("""
        def unwrap(m):
            return m.module if hasattr(m, "module") else m
        def train(net, batches):
            model = DDP(net)
            model.register_comm_hook(None, count_hook)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in batches:
                loss = F.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                with torch.no_grad():
                    unwrap(model)(x)
            return unwrap(model).state_dict()
        train(nn.Linear(3, 1), [(torch.randn(4, 3), torch.randn(4, 1))])
        """, "GT453", holds="len(hooked) > 0"), Shape("""
        def unwrap(m):
            return m.module if hasattr(m, "module") else m
        def train(net, batches):
            model = DDP(net)
            model.register_comm_hook(None, count_hook)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in batches:
                loss = F.mse_loss(unwrap(model)(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            return unwrap(model).state_dict()
        train(nn.Linear(3, 1), [(torch.randn(4, 3), torch.randn(4, 1))])
        """, "GT453", 8, holds="hooked == []")),
    # GT453, a method of the inner module that runs its forward (`compute_loss`), reached
    # through a property. Look-alike: the property's method adds a regulariser to a loss made
    # through the wrapper (the reducer is armed: averaged with the rest)
    "method-of-inner-module-through-property": (Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)
            def forward(self, x):
                return self.fc(x)
            def loss_on(self, x, y):
                return ((self(x) - y) ** 2).mean()
        class Runner:
            def __init__(self):
                self.net = DDP(Net())
                self.net.register_comm_hook(None, count_hook)
                self.opt = torch.optim.Adam(self.net.parameters())
            @property
            def raw(self):
                return self.net.module
            def run(self, x, y):
                loss = ((self.net(x) - y) ** 2).mean() + 1e-4 * self.raw.fc.weight.norm()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
        Runner().run(torch.randn(3, 4), torch.randn(3, 2))
        """, "GT453", holds="len(hooked) > 0"), Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)
            def forward(self, x):
                return self.fc(x)
            def loss_on(self, x, y):
                return ((self(x) - y) ** 2).mean()
        class Runner:
            def __init__(self):
                self.net = DDP(Net())
                self.net.register_comm_hook(None, count_hook)
                self.opt = torch.optim.Adam(self.net.parameters())
            @property
            def raw(self):
                return self.net.module
            def run(self, x, y):
                loss = self.raw.loss_on(x, y)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
        Runner().run(torch.randn(3, 4), torch.randn(3, 2))
        """, "GT453", 18, holds="hooked == []")),
    # GT466, mechanism: the backpropagated loss is all-reduced in place (unrecorded) and then
    # scaled (recorded): backward sees only the scaling. One rank stands for two with a factor
    # of 2; the proof: the gradient is half the local one. A trainer's `/=` (look-alike: a
    # detached copy is reduced for logging)
    "loss-reduced-then-divided-in-trainer": (Shape("""
        class Trainer:
            def __init__(self, model, ranks=2):
                self.model, self.ranks = model, ranks
                self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
            def step(self, x, y):
                loss = F.mse_loss(self.model(x), y)
                logged = loss.detach().clone()
                dist.all_reduce(logged)
                logged /= self.ranks
                self.opt.zero_grad()
                loss.backward()
                return logged.item()
        net = nn.Linear(3, 1)
        x, y = torch.randn(4, 3), torch.randn(4, 1)
        Trainer(net).step(x, y)
        ref = torch.autograd.grad(F.mse_loss(net(x), y), net.weight)[0]
        """, "GT466", holds="torch.allclose(net.weight.grad, ref)"), Shape("""
        class Trainer:
            def __init__(self, model, ranks=2):
                self.model, self.ranks = model, ranks
                self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
            def step(self, x, y):
                loss = F.mse_loss(self.model(x), y)
                dist.all_reduce(loss)
                loss /= self.ranks
                self.opt.zero_grad()
                loss.backward()
                return loss.item()
        net = nn.Linear(3, 1)
        x, y = torch.randn(4, 3), torch.randn(4, 1)
        Trainer(net).step(x, y)
        ref = torch.autograd.grad(F.mse_loss(net(x), y), net.weight)[0]
        """, "GT466", 8, holds="torch.allclose(net.weight.grad, ref / 2)")),
    # GT466, a training function with the rebinding spelling and `.div_` (look-alike: the
    # reduction on `loss.item()` for logging)
    "loss-reduced-then-rebound-in-loop": (Shape("""
        def train(model, opt, batches, ranks=2):
            for x, y in batches:
                loss = model(x).sub(y).pow(2).mean()
                total = torch.tensor(loss.item())
                dist.all_reduce(total)
                total.div_(ranks)
                opt.zero_grad()
                loss.backward()
                opt.step()
        net = nn.Linear(3, 1)
        x, y = torch.randn(4, 3), torch.randn(4, 1)
        ref = torch.autograd.grad(net(x).sub(y).pow(2).mean(), net.weight)[0]
        train(net, torch.optim.SGD(net.parameters(), lr=0.0), [(x, y)])
        """, "GT466", holds="torch.allclose(net.weight.grad, ref)"), Shape("""
        def train(model, opt, batches, ranks=2):
            for x, y in batches:
                loss = model(x).sub(y).pow(2).mean()
                dist.all_reduce(loss)
                loss = loss / ranks
                opt.zero_grad()
                loss.backward()
                opt.step()
        net = nn.Linear(3, 1)
        x, y = torch.randn(4, 3), torch.randn(4, 1)
        ref = torch.autograd.grad(net(x).sub(y).pow(2).mean(), net.weight)[0]
        train(net, torch.optim.SGD(net.parameters(), lr=0.0), [(x, y)])
        """, "GT466", 5, holds="torch.allclose(net.weight.grad, ref / 2)")),
    # GT466, the DDP script of the report with `.div_` (look-alike: the scaled copy is a clone)
    "ddp-loss-reduced-then-div-in-place": (Shape("""
        def main(world_size=2):
            model = DDP(nn.Linear(3, 1))
            opt = torch.optim.SGD(model.parameters(), lr=0.0)
            loss = model(torch.ones(2, 3)).sum()
            shown = loss.detach().clone()
            dist.all_reduce(shown, dist.ReduceOp.SUM)
            shown.div_(world_size)
            opt.zero_grad()
            loss.backward()
            return model.module.weight.grad
        g = main()
        """, "GT466", holds="torch.allclose(g, torch.full((1, 3), 2.0))"), Shape("""
        def main(world_size=2):
            model = DDP(nn.Linear(3, 1))
            opt = torch.optim.SGD(model.parameters(), lr=0.0)
            loss = model(torch.ones(2, 3)).sum()
            dist.all_reduce(loss, dist.ReduceOp.SUM)
            loss.div_(world_size)
            opt.zero_grad()
            loss.backward()
            return model.module.weight.grad
        g = main()
        """, "GT466", 6, holds="torch.allclose(g, torch.full((1, 3), 1.0))")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


@pytest.mark.parametrize("name", sorted(DIST_SHAPES))
def test_distributed_look_alike_is_silent_and_runs(name: str, one_rank: None) -> None:
    judge(DIST, DIST_SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(DIST_SHAPES))
def test_distributed_twin_is_reported_and_wrong(name: str, one_rank: None) -> None:
    judge(DIST, DIST_SHAPES[name][1])
