"""Shapes that fired wrongly on projects the team never triaged (issue "Root cause, every
time", section 4), each next to its buggy twin. Every snippet is also *run* on real torch:
the silent one trains, the twin fails (or silently does not train) exactly as the rule says,
so the checker's verdict is tested against PyTorch itself."""
from __future__ import annotations

import textwrap
from typing import NamedTuple

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

PRELUDE = """
import torch
import torch.nn as nn
from torch.autograd import Variable
torch.manual_seed(0)
ce = nn.CrossEntropyLoss()
labels = torch.tensor([0, 1, 0])
"""


class Shape(NamedTuple):
    src: str
    code: str                 # the rule that must stay silent / fire
    line: int | None = None   # buggy twin: the line reported (1-based, after the prelude)
    raises: str | None = None  # buggy twin: what real torch raises
    holds: str | None = None  # an expression true after running it (the silent symptom, or
    #                           that the look-alike did what it should)


SECOND_TIME = "Trying to backward through the graph a second time"

SHAPES = {
    # PGD-style loop: autograd.grad w.r.t. a perturbation stops there, the features computed
    # before the loop keep their graph (NOTE [grad inputs])
    "grad-wrt-perturbation-keeps-upstream": (Shape("""
        encoder, head = nn.Linear(4, 4), nn.Linear(4, 2)
        feats = encoder(torch.randn(3, 4))
        for _ in range(3):
            delta = torch.zeros_like(feats, requires_grad=True)
            adv = ce(head(feats + delta), labels)
            g, = torch.autograd.grad(adv, delta)
        loss = ce(head(feats + g.sign()), labels)
        loss.backward()
        """, "GT507"), Shape("""
        encoder, head = nn.Linear(4, 4), nn.Linear(4, 2)
        feats = encoder(torch.randn(3, 4))
        for _ in range(3):
            delta = torch.zeros_like(feats, requires_grad=True)
            adv = ce(head(feats + delta), labels)
            g, = torch.autograd.grad(adv, encoder.weight)
        loss = ce(head(feats + g.sum()), labels)
        loss.backward()
        """, "GT507", 2, SECOND_TIME)),
    # a gradient taken w.r.t. shared features: their own graph is not run, a later backward
    # through them is fine; one w.r.t. something upstream frees what lies between
    "grad-wrt-shared-features": (Shape("""
        backbone, cls_head, box_head = nn.Linear(4, 4), nn.Linear(4, 2), nn.Linear(4, 2)
        features = backbone(torch.randn(3, 4))
        out = cls_head(features)
        g = torch.autograd.grad(ce(out, labels), features)
        loss_box = ce(box_head(features), labels)
        loss_box.backward()
        """, "GT509"), Shape("""
        backbone, cls_head, box_head = nn.Linear(4, 4), nn.Linear(4, 2), nn.Linear(4, 2)
        features = backbone(torch.randn(3, 4))
        out = cls_head(features)
        g = torch.autograd.grad(ce(out, labels), features)
        loss_box = ce(out * 2, labels)
        loss_box.backward()
        """, "GT509", 4, SECOND_TIME)),
    # WGAN-GP: the penalty helper wraps its inputs in the legacy Variable(..., requires_grad=
    # True), a new leaf, so the discriminator loss holds no path into the generator
    "penalty-helper-makes-a-new-leaf": (Shape("""
        netG = nn.Sequential(nn.Linear(2, 4), nn.Tanh())
        netD = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
        def gradient_penalty(D, real, fake):
            alpha = torch.rand(real.size(0), 1)
            interp = Variable(alpha * real + (1 - alpha) * fake, requires_grad=True)
            grads = torch.autograd.grad(D(interp).sum(), interp, create_graph=True)[0]
            return ((grads.norm(2, dim=1) - 1) ** 2).mean()
        real, fake = torch.randn(3, 4), netG(torch.randn(3, 2))
        d_loss = netD(fake.detach()).mean() - netD(real).mean() + gradient_penalty(netD, real, fake)
        d_loss.backward()
        g_loss = -netD(fake).mean()
        g_loss.backward()
        """, "GT509"), Shape("""
        netG = nn.Sequential(nn.Linear(2, 4), nn.Tanh())
        netD = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
        def gradient_penalty(D, real, fake):
            alpha = torch.rand(real.size(0), 1)
            interp = alpha * real + (1 - alpha) * fake
            grads = torch.autograd.grad(D(interp).sum(), interp, create_graph=True)[0]
            return ((grads.norm(2, dim=1) - 1) ** 2).mean()
        real, fake = torch.randn(3, 4), netG(torch.randn(3, 2))
        d_loss = netD(fake.detach()).mean() - netD(real).mean() + gradient_penalty(netD, real, fake)
        d_loss.backward()
        g_loss = -netD(fake).mean()
        g_loss.backward()
        """, "GT509", 10, SECOND_TIME)),
    # a branch only a PyTorch fork runs (mmcv): on PyTorch the tensor never requires grad
    "requires-grad-in-a-dead-branch": (Shape("""
        def fill(x):
            out = torch.empty_like(x)
            if torch.__version__ == 'parrots':
                out.requires_grad = True
            out.copy_(x * 2)
            return out
        y = fill(torch.ones(2, 2))
        """, "GT302", holds="not y.requires_grad"), Shape("""
        def fill(x):
            out = torch.empty_like(x)
            if x.dim() == 2:
                out.requires_grad = True
            out.copy_(x * 2)
            return out
        y = fill(torch.ones(2, 2))
        """, "GT302", 5, "a leaf Variable that requires grad")),
    # a freeze and an unfreeze in exclusive branches of one `if`
    "freeze-and-unfreeze-in-exclusive-branches": (Shape("""
        model = nn.Module()
        model.body, model.head = nn.Linear(4, 4), nn.Linear(4, 2)
        def setup(model, mode):
            if mode == "head":
                for p in model.head.parameters():
                    p.requires_grad = True
            elif mode == "none":
                for p in model.parameters():
                    p.requires_grad = False
        setup(model, "head")
        """, "GT408", holds="all(p.requires_grad for p in model.head.parameters())"), Shape("""
        model = nn.Module()
        model.body, model.head = nn.Linear(4, 4), nn.Linear(4, 2)
        def setup(model, mode):
            if mode == "head":
                for p in model.head.parameters():
                    p.requires_grad = True
            for p in model.parameters():
                p.requires_grad = False
        setup(model, "head")
        """, "GT408", 7, holds="not any(p.requires_grad for p in model.head.parameters())")),
    # a plain dict of layers on self, handed whole to a child module that registers it
    "layer-dict-handed-to-a-registering-child": (Shape("""
        class Heads(nn.Module):
            def __init__(self, layers):
                super().__init__()
                self.layers = nn.ModuleDict(layers)
        class Model(nn.Module):
            def __init__(self, tasks):
                super().__init__()
                self.task_layers = {}
                for t in tasks:
                    self.task_layers[t] = nn.Linear(4, 2)
                self.heads = Heads(self.task_layers)
        model = Model(["a", "b"])
        """, "GT401", holds="len(list(model.parameters())) == 4"), Shape("""
        class Model(nn.Module):
            def __init__(self, tasks):
                super().__init__()
                self.layer_dict = {}
                for t in tasks:
                    self.layer_dict[t] = nn.Linear(4, 2)
                self.n = len(self.layer_dict)
        model = Model(["a", "b"])
        """, "GT401", 4, holds="len(list(model.parameters())) == 0")),
    # a requires-grad constant only there to switch gradients on for checkpointed inputs
    "requires-grad-switch-for-checkpoint": (Shape("""
        from torch.utils.checkpoint import checkpoint
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.dummy = torch.ones(1, requires_grad=True)
            def forward(self, x):
                x = x + self.dummy - self.dummy
                return checkpoint(self.fc, x, use_reentrant=True)
        block = Block()
        block(torch.randn(2, 4)).sum().backward()
        """, "GT402", holds="block.fc.weight.grad is not None"), Shape("""
        from torch.utils.checkpoint import checkpoint
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.scale = torch.ones(1, requires_grad=True)
            def forward(self, x):
                x = x + self.scale - self.scale * 0.5
                return checkpoint(self.fc, x, use_reentrant=True)
        block = Block()
        block(torch.randn(2, 4)).sum().backward()
        """, "GT402", 6, holds="'scale' not in dict(block.named_parameters())")),
    # `.data` of a batch object (a field), next to `.data` of a model output (a cut)
    "data-field-of-a-batch-object": (Shape("""
        class Batch:
            def __init__(self, data, target):
                self.data, self.target = data, target
        model = nn.Linear(4, 1)
        for raw in [torch.randn(3, 4)]:
            batch = Batch(raw, torch.zeros(3, 1))
            loss = nn.functional.mse_loss(model(batch.data), batch.target)
            loss.backward()
        """, "GT105", holds="model.weight.grad is not None"), Shape("""
        model = nn.Linear(4, 1)
        for raw in [torch.randn(3, 4)]:
            out = model(raw)
            loss = nn.functional.mse_loss(out.data, torch.zeros(3, 1))
            loss.backward()
        """, "GT105", 4, "does not require grad")),
    # first-order MAML: `torch.autograd.grad` without create_graph returns tensors without
    # history; the adapted weights start a new graph (MAML-Pytorch meta.py)
    "fast-weights-from-plain-grads": (Shape("""
        net, x = nn.Linear(4, 2), torch.randn(3, 4)
        loss = ce(net(x), labels)
        grad = torch.autograd.grad(loss, net.parameters())
        fast = [p - 0.1 * g for g, p in zip(grad, net.parameters())]
        loss = ce(nn.functional.linear(x, fast[0], fast[1]), labels)
        loss.backward()
        """, "GT509", holds="net.weight.grad is not None"), Shape("""
        net, x = nn.Linear(4, 2), torch.randn(3, 4)
        logits = net(x)
        grad = torch.autograd.grad(ce(logits, labels), net.parameters())
        fast = [p - 0.1 * g for g, p in zip(grad, net.parameters())]
        loss = ce(logits * 2, labels)
        loss.backward()
        """, "GT509", 3, SECOND_TIME)),
    # the generator steps every few critic passes, with its own backward under that `if`:
    # the every-pass backward is the critic's (PyTorch-GAN wgan.py, cluster_gan)
    "generator-every-n-critic-steps": (Shape("""
        G, D = nn.Linear(2, 4), nn.Linear(4, 1)
        opt_g, opt_d = torch.optim.SGD(G.parameters(), 0.1), torch.optim.SGD(D.parameters(), 0.1)
        for i in range(4):
            opt_d.zero_grad()
            opt_g.zero_grad()
            z = torch.randn(3, 2)
            d_loss = D(G(z).detach()).mean() - D(torch.randn(3, 4)).mean()
            d_loss.backward()
            opt_d.step()
            if i % 2 == 0:
                g_loss = -D(G(z)).mean()
                g_loss.backward()
                opt_g.step()
        """, "GT512"), Shape("""
        net, accum = nn.Linear(4, 2), 2
        opt = torch.optim.SGD(net.parameters(), 0.1)
        for i, x in enumerate([torch.randn(3, 4), torch.randn(3, 4)]):
            opt.zero_grad()
            loss = ce(net(x), labels) / accum
            loss.backward()
            if (i + 1) % accum == 0:
                last = torch.autograd.grad(ce(net(x), labels) / accum, net.weight)[0]
                g_step = net.weight.grad.clone()
                opt.step()
        """, "GT512", 4, holds="torch.allclose(g_step, last)")),
    "critic-every-pass-generator-periodic-unscaled": (Shape("""
        G, D, n_critic = nn.Linear(2, 4), nn.Linear(4, 1), 2
        opt_g, opt_d = torch.optim.SGD(G.parameters(), 0.1), torch.optim.SGD(D.parameters(), 0.1)
        for i in range(4):
            opt_d.zero_grad()
            z = torch.randn(3, 2)
            loss_d = D(G(z).detach()).mean() - D(torch.randn(3, 4)).mean()
            loss_d.backward()
            opt_d.step()
            if i % n_critic == 0:
                opt_g.zero_grad()
                loss_g = -D(G(z)).mean()
                loss_g.backward()
                opt_g.step()
        """, "GT513", holds="G.weight.grad is not None"), Shape("""
        net, x, accum = nn.Linear(4, 2), torch.randn(3, 4), 2
        opt = torch.optim.SGD(net.parameters(), 0.1)
        one = torch.autograd.grad(ce(net(x), labels), net.weight)[0]
        for i in range(2):
            loss = ce(net(x), labels)
            loss.backward()
            if (i + 1) % accum == 0:
                g_step = net.weight.grad.clone()
                opt.step()
                opt.zero_grad()
        """, "GT513", 6, holds="torch.allclose(g_step, 2 * one)")),
    # a same-file metric helper that computes under no_grad returns no graph (SimCLR's
    # `accuracy`), so a running total of it holds none
    "metric-helper-under-no-grad": (Shape("""
        def score(output, target):
            with torch.no_grad():
                return (output.softmax(1).max(1)[0] * (target >= 0)).mean()
        net, total, loader = nn.Linear(4, 2), 0, [torch.randn(3, 4), torch.randn(3, 4)]
        for x in loader:
            logits = net(x)
            total += score(logits, labels)
        """, "GT505", holds="not total.requires_grad"), Shape("""
        def score(output, target):
            return (output.softmax(1).max(1)[0] * (target >= 0)).mean()
        net, total, loader = nn.Linear(4, 2), 0, [torch.randn(3, 4), torch.randn(3, 4)]
        for x in loader:
            logits = net(x)
            total += score(logits, labels)
        """, "GT505", 6, holds="total.requires_grad")),
    # `.data` in what forward returns: a region-proposal input next to a loss that trains the
    # same layer (Faster R-CNN's RPN), only its type read (SSD), or a value then detached
    "data-beside-a-live-use-of-the-layer": (Shape("""
        class RPN(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv, self.bbox = nn.Linear(4, 4), nn.Linear(4, 4)
            def forward(self, x, target):
                pred = self.bbox(self.conv(x))
                rois = pred.data.round().type(type(x.data))
                loss = (pred - target).pow(2).mean()
                return rois, loss
        rpn = RPN()
        rpn(torch.randn(3, 4), torch.zeros(3, 4))[1].backward()
        """, "GT105", holds="rpn.bbox.weight.grad is not None"), Shape("""
        class RPN(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv, self.bbox = nn.Linear(4, 4), nn.Linear(4, 4)
            def forward(self, x, target):
                pred = self.bbox(self.conv(x))
                rois = pred.data.round().type(type(x.data))
                loss = (rois - target).pow(2).mean()
                return rois, loss
        rpn = RPN()
        rpn(torch.randn(3, 4), torch.zeros(3, 4))[1].backward()
        """, "GT105", 7, "does not require grad")),
    "data-then-detached-anyway": (Shape("""
        class Crop(nn.Module):
            def __init__(self):
                super().__init__()
                self.base, self.loc, self.head = nn.Linear(4, 4), nn.Linear(4, 2), nn.Linear(4, 2)
            def forward(self, x):
                feat = self.base(x)
                grid = self.loc(feat)
                flipped = torch.stack([grid.data[:, 1], grid.data[:, 0]], 1)
                return self.head(feat * flipped.detach().sum())
        m = Crop()
        m(torch.randn(3, 4)).sum().backward()
        """, "GT105", holds="m.base.weight.grad is not None and m.loc.weight.grad is None"), Shape("""
        class Crop(nn.Module):
            def __init__(self):
                super().__init__()
                self.base, self.loc, self.head = nn.Linear(4, 4), nn.Linear(4, 2), nn.Linear(4, 2)
            def forward(self, x):
                feat = self.base(x)
                grid = self.loc(feat)
                flipped = torch.stack([grid.data[:, 1], grid.data[:, 0]], 1)
                return self.head(feat * flipped.sum())
        m = Crop()
        m(torch.randn(3, 4)).sum().backward()
        """, "GT105", 8, holds="m.loc.weight.grad is None")),
    # a plain dict of candidate backbones, one picked and stored on self (SimCLR)
    "dict-of-choices-one-registered": (Shape("""
        class Encoder(nn.Module):
            def __init__(self, arch):
                super().__init__()
                self.arch_dict = {"small": nn.Linear(4, 2), "large": nn.Linear(4, 8)}
                self.backbone = self._pick(arch)
            def _pick(self, name):
                model = self.arch_dict[name]
                return model
        enc = Encoder("small")
        """, "GT401", holds="len(list(enc.parameters())) == 2"), Shape("""
        class Encoder(nn.Module):
            def __init__(self, arch):
                super().__init__()
                self.arch_dict = {"small": nn.Linear(4, 2), "large": nn.Linear(4, 8)}
                self.arch = arch
            def forward(self, x):
                return self.arch_dict[self.arch](x)
        enc = Encoder("small")
        """, "GT401", 4, holds="len(list(enc.parameters())) == 0")),
    # actor and critic read different entries of one output, each stepped by its own
    # optimizer (DeepRL's PPO without a shared body)
    "actor-critic-entries-own-optimizers": (Shape("""
        class AC(nn.Module):
            def __init__(self):
                super().__init__()
                self.actor, self.critic = nn.Linear(4, 2), nn.Linear(4, 1)
            def forward(self, obs):
                return {"logp": self.actor(obs).log_softmax(-1), "v": self.critic(obs)}
        network = AC()
        actor_opt = torch.optim.SGD(network.actor.parameters(), 0.1)
        critic_opt = torch.optim.SGD(network.critic.parameters(), 0.1)
        prediction = network(torch.randn(3, 4))
        policy_loss = -prediction["logp"].mean()
        value_loss = prediction["v"].pow(2).mean()
        actor_opt.zero_grad()
        policy_loss.backward()
        actor_opt.step()
        critic_opt.zero_grad()
        value_loss.backward()
        critic_opt.step()
        """, "GT509", holds="network.critic.weight.grad is not None"), Shape("""
        class AC(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 4)
                self.actor, self.critic = nn.Linear(4, 2), nn.Linear(4, 1)
            def forward(self, obs):
                h = torch.tanh(self.body(obs))
                return {"logp": self.actor(h).log_softmax(-1), "v": self.critic(h)}
        network = AC()
        opt = torch.optim.SGD(network.parameters(), 0.1)
        prediction = network(torch.randn(3, 4))
        policy_loss = -prediction["logp"].mean()
        value_loss = prediction["v"].pow(2).mean()
        opt.zero_grad()
        policy_loss.backward()
        value_loss.backward()
        opt.step()
        """, "GT509", 15, SECOND_TIME)),
}


def _source(shape: Shape) -> str:
    return PRELUDE + textwrap.dedent(shape.src).lstrip("\n")


def _found(shape: Shape) -> list[tuple[int, str]]:
    found = check_source(_source(shape), "shape.py", select=[shape.code])
    offset = PRELUDE.count("\n")
    return sorted((f.line - offset, f.code) for f in found)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    good, _ = SHAPES[name]
    assert _found(good) == []
    env: dict = {}
    exec(compile(_source(good), "good.py", "exec"), env)  # real torch: no error
    if good.holds:
        assert eval(good.holds, env)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    _, bad = SHAPES[name]
    assert _found(bad) == [(bad.line, bad.code)]
    env: dict = {}
    if bad.raises:
        with pytest.raises(RuntimeError, match=bad.raises):
            exec(compile(_source(bad), "bad.py", "exec"), env)
    else:
        exec(compile(_source(bad), "bad.py", "exec"), env)
    if bad.holds:
        assert eval(bad.holds, env)
