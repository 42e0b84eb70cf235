"""Shapes from the projects of docs/triage/unseen44b.md (session 44), each in another spelling
than the project's and next to a buggy twin that is still reported; the single-file ones run on
real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # ZJULiHongxin/HRNet-Hand-Pose-Estimation (function3D_GAN.py): both optimizers cleared every
    # pass, the critic's step under `if i % n_critic != 0:`: it is left out every n-th pass, no
    # gradients wait for it to add up (NOTE [all but every n-th pass]). Twin: the step under
    # `(i + 1) % k == 0`, the clear every pass: each step applies the last micro-batch alone
    "critic-step-left-out-every-nth-pass": (Shape("""
        gen, critic = nn.Linear(2, 2), nn.Linear(2, 1)
        g_opt = torch.optim.SGD(gen.parameters(), lr=0.1)
        c_opt = torch.optim.SGD(critic.parameters(), lr=0.1)
        steps = 0
        for i in range(6):
            x = torch.randn(4, 2)
            g_opt.zero_grad()
            c_opt.zero_grad()
            (critic(gen(x)).mean() + gen(x).pow(2).mean()).backward()
            g_opt.step()
            if i % 3 != 0:
                c_opt.step()
                steps += 1
        """, "GT512", holds="steps == 4"),
        Shape("""
        net = nn.Linear(2, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        xs = [torch.randn(4, 2) for _ in range(2)]
        w0, b0 = net.weight.detach().clone(), net.bias.detach().clone()
        for i, x in enumerate(xs):
            opt.zero_grad()
            net(x).pow(2).mean().backward()
            if (i + 1) % 2 == 0:
                opt.step()
        probe = nn.Linear(2, 1)
        probe.load_state_dict({"weight": w0, "bias": b0})
        probe(xs[1]).pow(2).mean().backward()
        """, "GT512", line=6, holds="torch.allclose(net.weight, w0 - 0.1 * probe.weight.grad)")),
    # Aseeef/slimmable-medical-segmentation (BRACSDuckNet*.py): every parameter frozen, then
    # `self.seg_head = conv1x1(c, k)` built and `self.seg_head.requires_grad = True`: the new
    # head's parameters already require grad, nothing to unfreeze (NOTE [fresh part unfrozen]).
    # Twin: the same flag on a part built before the freeze (its up_stage1): still frozen
    "flag-on-a-head-built-after-the-freeze": (Shape("""
        def head(i, o):
            return nn.Conv2d(i, o, kernel_size=1)
        class Seg(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Conv2d(3, 4, 3)
                for p in self.parameters():
                    p.requires_grad = False
                self.seg_head = head(4, 2)
                self.seg_head.requires_grad = True
        net = Seg()
        """, "GT407", holds="net.seg_head.weight.requires_grad"),
        Shape("""
        def head(i, o):
            return nn.Conv2d(i, o, kernel_size=1)
        class Seg(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Conv2d(3, 4, 3)
                for p in self.parameters():
                    p.requires_grad = False
                self.body.requires_grad = True
                self.seg_head = head(4, 2)
        net = Seg()
        """, "GT407", line=9, holds="not net.body.weight.requires_grad")),
    # toshihikochen/monocular-depth-estimation-by-deep-learning (trainers/base_trainer.py):
    # `set_train_mode(enable)` turns grad on in one arm and off in the other, and every epoch
    # calls `set_train_mode(True)` before training (NOTE [grad switch]). Twin: the switch is
    # only ever turned off, the next epoch trains with grad off and backward raises
    "grad-switch-turned-on-before-training": (Shape("""
        class Trainer:
            def __init__(self):
                self.model = nn.Linear(2, 1)
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
            def set_mode(self, enable):
                if enable:
                    self.model.train()
                    torch.set_grad_enabled(True)
                else:
                    self.model.eval()
                    torch.set_grad_enabled(False)
            def fit(self, data):
                for epoch in range(2):
                    self.set_mode(True)
                    for x in data:
                        self.opt.zero_grad()
                        self.model(x).pow(2).mean().backward()
                        self.opt.step()
                    self.set_mode(False)
                    for x in data:
                        self.model(x)
        t = Trainer()
        t.fit([torch.randn(4, 2)])
        torch.set_grad_enabled(True)
        """, "GT203", holds="t.model.weight.grad is not None"),
        Shape("""
        class Trainer:
            def __init__(self):
                self.model = nn.Linear(2, 1)
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
            def set_mode(self, enable):
                if enable:
                    self.model.train()
                else:
                    self.model.eval()
                    torch.set_grad_enabled(False)
            def fit(self, data):
                for epoch in range(2):
                    for x in data:
                        self.opt.zero_grad()
                        self.model(x).pow(2).mean().backward()
                        self.opt.step()
                    self.set_mode(False)
                    for x in data:
                        self.model(x)
        try:
            Trainer().fit([torch.randn(4, 2)])
        finally:
            torch.set_grad_enabled(True)
        """, "GT203", line=10, raises=(RuntimeError, "does not require grad"))),
    # eddie0509tw/Fast-3D-Human-Pose-Estimation (inference.py): `im = pil.fromarray(pose_img)`
    # of what the inferencer's plotting helpers drew, collected for a GIF: PIL hands back an
    # image, never a tensor with a graph (vocabulary.IMAGE_LIBRARIES, `_foreign.other_framework`).
    # Twin: the inferencer's prediction itself collected, with its graph
    "pil-image-of-a-drawn-array-collected": (Shape("""
        from PIL import Image
        def render(p):
            return (p.detach().clamp(0, 1) * 255).to(torch.uint8).numpy()
        class Viewer:
            def __init__(self):
                self.model = nn.Linear(4, 4).eval()
                self.renderers = [render]
            def show(self, x):
                return self.renderers[0](self.model(x)), 0
        viewer = Viewer()
        frames = []
        loader = [torch.rand(2, 4) for _ in range(3)]
        for x in loader:
            img, err = viewer.show(x)
            im = Image.fromarray(img)
            frames.append(im)
        """, "GT505", holds="frames[0].size == (4, 2)"),
        Shape("""
        class Viewer:
            def __init__(self):
                self.model = nn.Linear(4, 4).eval()
            def show(self, x):
                return self.model(x), 0
        viewer = Viewer()
        frames = []
        loader = [torch.rand(2, 4) for _ in range(3)]
        for x in loader:
            img, err = viewer.show(x)
            frames.append(img)
        """, "GT505", line=11, holds="frames[0].grad_fn is not None")),
    # Aseeef/slimmable-medical-segmentation (core/slim_seg_trainer.py): `total_loss` sums each
    # width's loss, each backwarded, over `for w in widths` running the model on the same batch
    # and returned to a caller that makes it anew per batch (NOTE [same batch each pass]).
    # Twin: the helper's loop walks the batches: every step's graph nodes stay reachable
    "sum-over-widths-of-one-batch": (Shape("""
        class Slim(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.width = 1.0
            def forward(self, x):
                return self.fc(x) * self.width
        def widths_step(model, images, masks, widths):
            total_loss = 0.0
            for w in widths:
                model.width = w
                loss_w = F.mse_loss(model(images), masks)
                loss_w.backward()
                total_loss += loss_w
            return total_loss
        model = Slim()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in [(torch.randn(2, 4), torch.randn(2, 4))] * 2:
            opt.zero_grad()
            total = widths_step(model, x, y, [1.0, 0.5])
            opt.step()
        """, "GT505", holds="total.grad_fn is not None"),
        Shape("""
        class Slim(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                return self.fc(x)
        def batches_step(model, batches):
            total_loss = 0.0
            for images, masks in batches:
                loss = F.mse_loss(model(images), masks)
                loss.backward()
                total_loss += loss
            return total_loss
        model = Slim()
        total = batches_step(model, [(torch.randn(2, 4), torch.randn(2, 4))] * 3)
        """, "GT505", line=12, holds="total.grad_fn is not None")),
    # Fattehh/BPE-for-Knowledge-Graph-Embeddings (examples/KnowledgeGraphEmbeddings.ipynb):
    # `torch_yhat = torch.tensor(yhat.data, requires_grad=True)`, a BCE of it, backward, then
    # `torch_yhat.grad.item()` checked against a hand-derived gradient: the new leaf is what
    # backward differentiates by design (NOTE [probed leaf]). Twin: the same re-wrap as a
    # band-aid inside a training step, its `.grad` never read: the model gets no gradient
    "new-leaf-whose-own-grad-is-checked": (Shape("""
        net = nn.Linear(2, 1)
        yhat = torch.sigmoid(net(torch.randn(1, 2)))[0, 0]
        def probe():
            torch_yhat = torch.tensor(yhat.data, requires_grad=True)
            loss = F.binary_cross_entropy(torch_yhat, torch.tensor(1.0))
            loss.backward()
            return torch_yhat.grad.item()
        g = probe()
        p = yhat.item()
        """, "GT105", holds="abs(g - (p - 1.0) / (p * (1 - p))) < 1e-4"),
        Shape("""
        net = nn.Linear(2, 1)
        def step(x):
            yhat = torch.sigmoid(net(x))[0, 0]
            torch_yhat = torch.tensor(yhat.data, requires_grad=True)
            loss = F.binary_cross_entropy(torch_yhat, torch.tensor(1.0))
            loss.backward()
            return loss.item()
        step(torch.randn(1, 2))
        """, "GT105", line=4, holds="net.weight.grad is None")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_silent_look_alike_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
