"""Graph cuts one call or one container away, grad mode in evaluation passes, and leaves
PyTorch refuses (issue "Root cause, every time", sections 2 and 3): for each mechanism a
silent look-alike and buggy twins in other spellings. Every snippet also runs on real torch:
the look-alike trains, the twin fails (or silently does not train) as the finding says."""
from __future__ import annotations

import argparse
import textwrap
from typing import NamedTuple

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

PRELUDE = """
import argparse
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.modules.loss import _Loss
torch.manual_seed(0)
"""


class Shape(NamedTuple):
    src: str
    code: str                 # the rule that must stay silent / fire
    line: int | None = None   # buggy twin: the line reported (1-based, after the prelude)
    raises: str | None = None  # buggy twin: what real torch raises
    holds: str | None = None  # true after running it (the silent symptom / the look-alike works)


ELEMENT0 = "does not require grad and does not have a grad_fn"
LEAF_FLAG = "you can only change requires_grad flags of leaf variables"
INT_GRAD = "Only Tensors of floating point and complex dtype can require gradients"

GOOD = {
    # the attack loop detaches the perturbed image before asking for grad again
    "loop-rebinds-flagged-tensor": Shape("""
        model = nn.Sequential(nn.Flatten(), nn.Linear(12, 3))

        def attack(image, steps=3):
            image = image.clone()
            for _ in range(steps):
                image.requires_grad = True
                loss = model(image).sum()
                grad, = torch.autograd.grad(loss, image)
                image = torch.clamp(image + 0.01 * grad.sign(), 0, 1).detach()
            return image

        adv = attack(torch.rand(1, 3, 2, 2))
        """, "GT303", holds="adv.is_leaf"),
    # completions sampled under no_grad are normal tensors: training on them works
    "inference-tensor-through-helper": Shape("""
        emb, head = nn.Embedding(8, 4), nn.Linear(4, 8)
        model = nn.Sequential(emb, head)

        def token_logps(net, ids):
            logits = net(ids[:, :-1])
            return logits.log_softmax(-1).gather(2, ids[:, 1:].unsqueeze(-1)).squeeze(-1)

        with torch.no_grad():
            ids = torch.randint(0, 8, (2, 5))
            old = token_logps(model, ids)
        loss = -(token_logps(model, ids) - old).exp().mean()
        loss.backward()
        """, "GT204", holds="emb.weight.grad is not None"),
    # new rows added under no_grad: ordinary parameters
    "parameters-replaced-under-inference-mode": Shape("""
        model = nn.Sequential(nn.Embedding(6, 4), nn.Linear(4, 6))

        @torch.no_grad()
        def grow(m, n):
            old = m[1].weight
            m[1].weight = nn.Parameter(old * n)

        grow(model, 2)
        model(torch.randint(0, 6, (3,))).sum().backward()
        """, "GT204", holds="model[1].weight.grad is not None"),
    # the squeeze inside the wrap: a registered Parameter
    "parameter-view-after-wrapping": Shape("""
        class Snake(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.a = nn.Parameter(torch.ones(1, n).squeeze(0))

        s = Snake(4)
        """, "GT403", holds="len(list(s.parameters())) == 1"),
    # the generator step scores `fake` itself; the discriminator step detaches it
    "stepped-model-cut": Shape("""
        class GAN:
            def __init__(self):
                self.G, self.D = nn.Linear(4, 4), nn.Linear(4, 1)
                self.opt_g = torch.optim.Adam(self.G.parameters())
                self.opt_d = torch.optim.Adam(self.D.parameters())

            def step(self, z, real):
                fake = self.G(z)
                d_loss = F.softplus(self.D(fake.detach())).mean() + F.softplus(-self.D(real)).mean()
                self.opt_d.zero_grad()
                d_loss.backward()
                self.opt_d.step()
                g_loss = F.softplus(-self.D(fake)).mean() + 10 * F.l1_loss(fake, real)
                self.opt_g.zero_grad()
                g_loss.backward()
                self.opt_g.step()

        gan = GAN()
        before = gan.G.weight.detach().clone()
        gan.step(torch.randn(2, 4), torch.randn(2, 4))
        """, "GT109", holds="gan.G.weight.grad is not None and gan.D.weight.grad is not None"),
    # the generator step scores `fake` itself: the adversarial term reaches the generator
    "gan-g-step-losses-unpacked": Shape("""
        g, d = nn.Linear(4, 4), nn.Sequential(nn.Linear(4, 1), nn.Sigmoid())
        adv, rec = nn.BCELoss(), nn.L1Loss()
        fake = g(torch.randn(2, 4))
        pred = d(fake)
        loss = adv(pred, torch.ones(2, 1)) + 10 * rec(fake, torch.zeros(2, 4))
        loss.backward()
        """, "GT107", holds="g.weight.grad is not None and d[0].weight.grad is not None"),
    # a `_Loss` subclass whose helper makes soft (sigmoid) masks: differentiable
    "loss-class-soft-mask-helper": Shape("""
        class SoftIoU(_Loss):
            def inside(self, box):
                grid = torch.arange(8.0)
                return torch.sigmoid(grid - box[0]) * torch.sigmoid(box[1] - grid)

            def forward(self, pred, target):
                a, b = self.inside(pred), self.inside(target)
                inter = (a * b).sum()
                return 1 - inter / (a.sum() + b.sum() - inter)

        net = nn.Linear(3, 2)
        loss = SoftIoU()(net(torch.randn(3)) * 8, torch.tensor([2.0, 6.0]))
        loss.backward()
        """, "GT108", holds="net.weight.grad is not None"),
    # validation under no_grad that only measures
    "validation-without-backward": Shape("""
        class Trainer:
            def __init__(self):
                self.model = nn.Linear(3, 1)

            def val(self, x, y):
                self.model.eval()
                with torch.no_grad():
                    loss = F.mse_loss(self.model(x), y)
                self.model.train()
                return loss.item()

        t = Trainer()
        value = t.val(torch.randn(4, 3), torch.randn(4, 1))
        """, "GT207", holds="isinstance(value, float)"),
    # the sigmoid output keeps its gradient with retain_grad(); requires_grad_() on a tensor
    # that already requires grad is allowed
    "non-leaf-retain-grad": Shape("""
        x = torch.zeros(3, requires_grad=True)
        s = torch.sigmoid(x)
        s.requires_grad_()
        s.retain_grad()
        s.sum().backward()
        """, "GT303", holds="s.grad is not None and x.grad is not None"),
    # float32 NumPy data: `.float()` returns the leaf itself
    "float32-numpy-cast-is-the-leaf": Shape("""
        a = np.random.rand(3).astype(np.float32)
        w = torch.from_numpy(a).requires_grad_().float()
        v = torch.tensor(np.array([1.0, 2.0, 3.0]), dtype=torch.float, requires_grad=True)
        (w * v).sum().backward()
        print(w.grad, v.grad)
        """, "GT305", holds="w.grad is not None and v.grad is not None"),
    # an integer mask wrapped as a frozen Parameter is allowed
    "frozen-integer-parameter": Shape("""
        class Core(nn.Module):
            def __init__(self, opt):
                super().__init__()
                self.mask = nn.Parameter(opt.mask, requires_grad=False)
                self.scale = nn.Parameter(opt.scale)

        opt = argparse.Namespace(mask=torch.tensor([1, 0, 1], dtype=torch.uint8),
                                 scale=torch.ones(3))
        core = Core(opt)
        """, "GT304", holds="len(list(core.parameters())) == 2"),
}

BAD = {
    # the perturbed image (a non-leaf) is flagged again on the next iteration
    "loop-rebinds-flagged-tensor": [Shape("""
        model = nn.Sequential(nn.Flatten(), nn.Linear(12, 3))

        def attack(image, steps=3):
            image = image.clone()
            for _ in range(steps):
                image.requires_grad = True
                loss = model(image).sum()
                grad, = torch.autograd.grad(loss, image)
                image = torch.clamp(image + 0.01 * grad.sign(), 0, 1)
            return image

        adv = attack(torch.rand(1, 3, 2, 2))
        """, "GT303", 9, LEAF_FLAG), Shape("""
        net = nn.Linear(4, 2)
        x = torch.zeros(1, 4)
        step = 0
        while step < 3:
            x.requires_grad = True
            net(x).sum().backward()
            x = x - 0.1 * x.grad
            step += 1
        """, "GT303", 7, LEAF_FLAG)],
    # completions sampled under inference_mode, fed to the model by a helper in training
    "inference-tensor-through-helper": [Shape("""
        emb, head = nn.Embedding(8, 4), nn.Linear(4, 8)
        model = nn.Sequential(emb, head)

        def token_logps(net, ids):
            logits = net(ids[:, :-1])
            return logits.log_softmax(-1).gather(2, ids[:, 1:].unsqueeze(-1)).squeeze(-1)

        with torch.inference_mode():
            ids = torch.randint(0, 8, (2, 5)) + 0
            old = token_logps(model, ids)
        loss = -(token_logps(model, ids) - old).exp().mean()
        loss.backward()
        """, "GT204", 8, "Inference tensors cannot be saved for backward"), Shape("""
        def score(net, tokens):
            return net(tokens).log_softmax(-1).mean()

        def train(model, opt):
            with torch.inference_mode():
                tokens = torch.randint(0, 8, (2, 5)) * 1
            loss = -score(model, tokens)
            loss.backward()
            opt.step()

        model = nn.Sequential(nn.Embedding(8, 4), nn.Linear(4, 8))
        train(model, torch.optim.SGD(model.parameters(), lr=0.1))
        """, "GT204", 5, "Inference tensors cannot be saved for backward")],
    # rows added to an embedding under inference_mode, then trained
    "parameters-replaced-under-inference-mode": [Shape("""
        model = nn.Sequential(nn.Embedding(6, 4), nn.Linear(4, 6))

        @torch.inference_mode()
        def grow(m, n):
            old = m[1].weight
            m[1].weight = nn.Parameter(old * n)

        grow(model, 2)
        model(torch.randint(0, 6, (3,))).sum().backward()
        """, "GT204", 3, "Inference tensors cannot be saved for backward"), Shape("""
        model = nn.Sequential(nn.Embedding(6, 4), nn.Linear(4, 4))
        with torch.inference_mode():
            w = model[1].weight
            model[1].weight = nn.Parameter(w * 0.5)
        model(torch.randint(0, 6, (3,))).sum().backward()
        """, "GT204", 2, "Inference tensors cannot be saved for backward")],
    # a view of a fresh Parameter stored on the module: not registered, never trained
    "parameter-view-after-wrapping": [Shape("""
        class Snake(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.a = nn.Parameter(torch.ones(1, n)).squeeze(0)

        s = Snake(4)
        """, "GT403", 4, holds="len(list(s.parameters())) == 0"), Shape("""
        class Scale(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.g = nn.Parameter(torch.ones(n, 1)).reshape(-1)

            def forward(self, x):
                return x * self.g

        s = Scale(4)
        """, "GT403", 4, holds="len(list(s.parameters())) == 0")],
    # the generator gets nothing from a term scored on a detached sample; a policy whose
    # outputs an object's method detaches before the log-probabilities leaves only logZ
    "stepped-model-cut": [Shape("""
        class GAN:
            def __init__(self):
                self.G, self.D = nn.Linear(4, 4), nn.Linear(4, 1)
                self.opt_g = torch.optim.Adam(self.G.parameters())

            def g_step(self, z, real):
                fake = self.G(z)
                adv = F.softplus(-self.D(fake.detach())).mean()
                g_loss = adv + 10 * F.l1_loss(fake, real)
                self.opt_g.zero_grad()
                g_loss.backward()
                self.opt_g.step()

        gan = GAN()
        gan.g_step(torch.randn(2, 4), torch.randn(2, 4))
        """, "GT109", 8, holds="gan.D.weight.grad is not None"), Shape("""
        class Sampler:
            def log_probs(self, outputs, actions):
                logits = outputs.detach()
                return torch.log_softmax(logits, 1).gather(1, actions[:, None]).squeeze(1)

        sampler = Sampler()
        policy = nn.Linear(3, 4)
        log_z = nn.Parameter(torch.zeros(1))
        opt = torch.optim.Adam([{"params": policy.parameters()}, {"params": [log_z]}])
        lp = sampler.log_probs(policy(torch.randn(5, 3)), torch.randint(0, 4, (5,)))
        loss = (log_z + lp.sum() - 1.5).pow(2)
        loss.backward()
        opt.step()
        """, "GT109", 3, holds="policy.weight.grad is None and log_z.grad is not None")],
    # the discriminator step's detach copied into the generator step; losses built in one line
    "gan-g-step-losses-unpacked": [Shape("""
        g, d = nn.Linear(4, 4), nn.Sequential(nn.Linear(4, 1), nn.Sigmoid())
        adv, rec = nn.BCELoss(), nn.L1Loss()
        fake = g(torch.randn(2, 4))
        pred = d(fake).detach()
        loss = adv(pred, torch.ones(2, 1)) + 10 * rec(fake, torch.zeros(2, 4))
        loss.backward()
        """, "GT107", 4, holds="d[0].weight.grad is None"), Shape("""
        def g_step(g, d, z, real):
            adv, rec = nn.BCELoss(), nn.L1Loss()
            fake = g(z)
            score = d(fake).detach()
            err_adv = adv(score, torch.ones(2, 1))
            err = err_adv + 50 * rec(fake, real)
            err.backward()

        g, d = nn.Linear(4, 4), nn.Sequential(nn.Linear(4, 1), nn.Sigmoid())
        g_step(g, d, torch.randn(2, 4), torch.zeros(2, 4))
        """, "GT107", 4, holds="d[0].weight.grad is None")],
    # comparisons in a helper method of a `_Loss` subclass: the loss has no graph
    "loss-class-soft-mask-helper": [Shape("""
        class HardIoU(_Loss):
            def inside(self, box):
                grid = torch.arange(8.0)
                return ((grid >= box[0]) & (grid <= box[1])).float()

            def forward(self, pred, target):
                a, b = self.inside(pred), self.inside(target)
                inter = (a * b).sum()
                return 1 - inter / (a.sum() + b.sum() - inter)

        net = nn.Linear(3, 2)
        loss = HardIoU()(net(torch.randn(3)) * 8, torch.tensor([2.0, 6.0]))
        loss.backward()
        """, "GT108", 4, ELEMENT0), Shape("""
        class RoundedL1(nn.L1Loss):
            def snap(self, v):
                return v.round()

            def forward(self, pred, target):
                return (self.snap(pred) - target).abs().mean()

        net = nn.Linear(3, 2)
        loss = RoundedL1()(net(torch.randn(3)) * 8, torch.tensor([2.0, 6.0]))
        loss.backward()
        """, "GT108", 3, holds="bool((net.weight.grad == 0).all())")],
    # backward inside the validation pass: the backward is the line to change
    "validation-without-backward": [Shape("""
        class Trainer:
            def __init__(self):
                self.model = nn.Linear(3, 1)
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)

            def val(self, x, y):
                self.model.eval()
                with torch.no_grad():
                    loss = F.mse_loss(self.model(x), y)
                    self.opt.zero_grad()
                    loss.backward()
                    self.opt.step()

        Trainer().val(torch.randn(4, 3), torch.randn(4, 1))
        """, "GT207", 11, ELEMENT0), Shape("""
        def evaluate(models, batch):
            for m in models:
                m.eval()
            with torch.inference_mode():
                out = models[1](models[0](batch))
                out.mean().backward()

        evaluate([nn.Linear(3, 3), nn.Linear(3, 1)], torch.randn(4, 3))
        """, "GT207", 6, ELEMENT0)],
    # `requires_grad = True` on a computed tensor
    "non-leaf-retain-grad": [Shape("""
        x = torch.zeros(3, requires_grad=True)
        s = torch.sigmoid(x)
        s.requires_grad = True
        """, "GT303", 3, LEAF_FLAG), Shape("""
        def features():
            w = torch.randn(3, requires_grad=True)
            h = F.softmax(w * 2, dim=0)
            h.requires_grad = True
            return h

        features()
        """, "GT303", 4, LEAF_FLAG)],
    # float64 NumPy data asked to require grad, then cast: the cast is the non-leaf in use
    "float32-numpy-cast-is-the-leaf": [Shape("""
        a = torch.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True).float()
        (a * torch.ones(3)).sum().backward()
        print(a.grad)
        """, "GT305", 1, holds="a.grad is None and not a.is_leaf"), Shape("""
        def fit():
            data = np.random.rand(3)
            w = torch.from_numpy(data).requires_grad_().float()
            (w * 2).sum().backward()
            return w.grad

        result = fit()
        """, "GT305", 3, holds="result is None")],
    # an integer mask made a trainable Parameter: directly, or passed in by the caller
    "frozen-integer-parameter": [Shape("""
        class Core(nn.Module):
            def __init__(self, opt):
                super().__init__()
                self.mask = nn.Parameter(opt.mask)

        opt = argparse.Namespace(mask=torch.tensor([1, 0, 1], dtype=torch.uint8))
        core = Core(opt)
        """, "GT304", 4, INT_GRAD), Shape("""
        class Core(nn.Module):
            def __init__(self, n):
                super().__init__()
                keep = torch.ones(n, dtype=torch.bool)
                self.keep = nn.Parameter(keep)

        core = Core(3)
        """, "GT304", 5, INT_GRAD)],
}


def _source(shape: Shape) -> str:
    return PRELUDE + textwrap.dedent(shape.src).lstrip("\n")


def _found(shape: Shape) -> list[tuple[int, str]]:
    found = check_source(_source(shape), "shape.py", select=[shape.code])
    offset = PRELUDE.count("\n")
    return sorted((f.line - offset, f.code) for f in found)


@pytest.mark.parametrize("name", sorted(GOOD))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    good = GOOD[name]
    assert _found(good) == []
    env: dict = {}
    exec(compile(_source(good), "good.py", "exec"), env)  # real torch: no error
    if good.holds:
        assert eval(good.holds, env)


pytestmark = pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor")
BAD_CASES = [(name, i) for name in sorted(BAD) for i in range(len(BAD[name]))]


@pytest.mark.parametrize("name,i", BAD_CASES)
def test_buggy_twin_is_reported_and_fails(name: str, i: int) -> None:
    bad = BAD[name][i]
    assert _found(bad) == [(bad.line, bad.code)]
    env: dict = {}
    if bad.raises:
        with pytest.raises(RuntimeError, match=bad.raises):
            exec(compile(_source(bad), "bad.py", "exec"), env)
    else:
        exec(compile(_source(bad), "bad.py", "exec"), env)
    if bad.holds:
        assert eval(bad.holds, env)


def test_every_mechanism_has_a_look_alike_and_two_twins() -> None:
    assert set(GOOD) == set(BAD)
    assert all(len(v) >= 2 for v in BAD.values())
    assert argparse.Namespace  # used by the snippets' prelude


def test_cut_under_a_miswired_optimizer_is_left_to_the_wiring_rule() -> None:
    """`opt_d` built over the generator: the D loss trains nothing `opt_d` steps, so the
    generator's detach there is not the problem (GT406 names the optimizer line)."""
    src = PRELUDE + textwrap.dedent("""
        g, d = nn.Linear(4, 4), nn.Linear(4, 1)
        opt_d = torch.optim.Adam(g.parameters())
        fake = g(torch.randn(2, 4))
        loss_d = F.relu(1 - d(torch.randn(2, 4))).mean() + F.relu(1 + d(fake.detach())).mean()
        loss_d.backward()
        opt_d.step()
        """)
    assert [f.code for f in check_source(src, "s.py", select=["GT109"])] == []


def test_detached_weight_next_to_the_real_cut_is_not_reported() -> None:
    """`log_probs * advantages.detach()` with `log_probs` rebuilt by `torch.tensor`: the
    numbers are the cut (GT102); the detached advantage is a deliberate weight, never GT107.
    Detaching the only model path of a term is still GT107."""
    body = """
        policy, critic = nn.Linear(3, 2), nn.Linear(3, 1)
        s = torch.randn(4, 3)
        logps = {logps}
        adv = torch.randn(4) - critic(s).squeeze(1)
        loss = -(logps * adv.detach()).mean() + adv.pow(2).mean()
        loss.backward()
        """
    rebuilt = PRELUDE + textwrap.dedent(body.format(
        logps="torch.tensor([p.item() for p in policy(s).log_softmax(1)[:, 0]])")).lstrip("\n")
    found = sorted((f.line - PRELUDE.count("\n"), f.code) for f in check_source(
        rebuilt, "s.py", select=["GT102", "GT104", "GT107"]))
    assert found == [(3, "GT102")]
    live = PRELUDE + textwrap.dedent(body.format(logps="policy(s).log_softmax(1)[:, 0]"))
    assert check_source(live, "s.py", select=["GT104", "GT107"]) == []
    env: dict = {}
    exec(compile(rebuilt, "bad.py", "exec"), env)  # runs: the actor term trains nothing
    assert env["policy"].weight.grad is None and env["critic"].weight.grad is not None
