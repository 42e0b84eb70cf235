"""Shapes that fired wrongly on the projects of docs/triage/unseen36b.md (session 36), each in
another spelling than the project's and next to a buggy twin that is still reported. Every
snippet runs on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # alias-free-gan-pytorch (`train.py`, rosinality's StyleGAN2 loop): `ada_aug_p =
    # ada_augment.tune(real_pred)`, a method decorated `@torch.no_grad()` that returns
    # `self.ada_aug_p`, an attribute only ever given a constant or a number made there; the
    # generator's loss reads the probability, not the discriminator's graph. Twin: the method
    # stores the prediction itself (an argument keeps its history under no_grad): the
    # generator's backward runs into the freed graph of the discriminator's step
    "probability-tuned-by-a-no-grad-method-of-the-stored-number": (Shape("""
        class Tuner:
            def __init__(self, target):
                self.target = target
                self.p = 0.0
            @torch.no_grad()
            def tune(self, pred):
                step = 0.01 if torch.sign(pred).mean().item() > self.target else -0.01
                self.p = min(1.0, max(0.0, self.p + step))
                return self.p
        gen, dis = nn.Linear(4, 4), nn.Linear(4, 1)
        g_opt = torch.optim.SGD(gen.parameters(), lr=0.1)
        d_opt = torch.optim.SGD(dis.parameters(), lr=0.1)
        tuner = Tuner(0.6)
        for real in torch.randn(3, 8, 4):
            real_pred = dis(real)
            d_loss = F.softplus(dis(gen(torch.randn(8, 4)).detach())).mean() + F.softplus(-real_pred).mean()
            d_opt.zero_grad()
            d_loss.backward()
            d_opt.step()
            p = tuner.tune(real_pred)
            fake = gen(torch.randn(8, 4)) * (1 - p)
            g_loss = F.softplus(-dis(fake)).mean()
            g_opt.zero_grad()
            g_loss.backward()
            g_opt.step()
        """, "GT509", holds="gen.weight.grad is not None"), Shape("""
        class Tuner:
            def __init__(self, target):
                self.target = target
                self.p = 0.0
            @torch.no_grad()
            def tune(self, pred):
                self.p = pred
                return self.p
        gen, dis = nn.Linear(4, 4), nn.Linear(4, 1)
        g_opt = torch.optim.SGD(gen.parameters(), lr=0.1)
        d_opt = torch.optim.SGD(dis.parameters(), lr=0.1)
        tuner = Tuner(0.6)
        for real in torch.randn(3, 8, 4):
            real_pred = torch.sigmoid(dis(real))
            d_loss = F.softplus(dis(gen(torch.randn(8, 4)).detach())).mean() + F.softplus(-real_pred).mean()
            d_opt.zero_grad()
            d_loss.backward()
            d_opt.step()
            p = tuner.tune(real_pred)
            fake = gen(torch.randn(8, 4)) * (1 - p)
            g_loss = F.softplus(-dis(fake)).mean()
            g_opt.zero_grad()
            g_loss.backward()
            g_opt.step()
        """, "GT509", line=19, raises=(RuntimeError, "backward through the graph a second time"))),
    # PyTorch-StudioGAN (`worker.py`, StyleGAN2's lazy R1 regularisation): the discriminator
    # steps on every pass, and every `reg_every`-th pass clears its gradients, backwards the
    # R1 penalty alone and steps again: a second update of its own, not an accumulation.
    # Twin: the branch steps the accumulated gradient without clearing it, and the stray step
    # outside it applies every pass's gradient on its own (ECO-pytorch's shape)
    "periodic-regularisation-update-cleared-in-its-branch": (Shape("""
        dis = nn.Linear(4, 1)
        opt = torch.optim.Adam(dis.parameters(), lr=0.01)
        reg_every = 2
        for i, real in enumerate(torch.randn(4, 8, 4)):
            opt.zero_grad()
            loss = F.softplus(-dis(real)).mean()
            loss.backward()
            opt.step()
            if i % reg_every == 0:
                opt.zero_grad()
                real.requires_grad_(True)
                grad, = torch.autograd.grad(dis(real).sum(), real, create_graph=True)
                r1 = grad.pow(2).sum(1).mean() * reg_every
                r1.backward()
                opt.step()
        steps = opt.state[dis.weight]["step"].item()
        """, "GT519", holds="steps == 6"), Shape("""
        dis = nn.Linear(4, 1)
        opt = torch.optim.Adam(dis.parameters(), lr=0.01)
        accum = 2
        for i, real in enumerate(torch.randn(4, 8, 4)):
            loss = F.softplus(-dis(real)).mean()
            loss.backward()
            if i % accum == 0:
                for p in dis.parameters():
                    p.grad /= accum
                opt.step()
                opt.zero_grad()
            opt.step()
        steps = opt.state[dis.weight]["step"].item()
        """, "GT519", line=12, holds="steps == 4")),  # 2 with the accumulation intended
    # UER-py (`uer/trainer.py`): the base trainer's loop backwards
    # `self.forward_propagation(batch, model)`, an abstract method, and steps every
    # `self.accumulation_steps` passes; every subclass filling the method in returns
    # `loss / self.accumulation_steps`. Twin: the subclass returns the loss as it is: each
    # step applies the sum of the micro-batches' gradients
    "accumulation-divided-in-the-subclass-of-a-template-trainer": (Shape("""
        class Trainer:
            def __init__(self, model, accum):
                self.model, self.accum = model, accum
                self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
                self.seen = []
            def loss_of(self, x):
                raise NotImplementedError
            def train(self, data):
                for i, x in enumerate(data):
                    loss = self.loss_of(x)
                    loss.backward()
                    if (i + 1) % self.accum == 0:
                        self.seen.append(self.model.weight.grad.clone())
                        self.opt.step()
                        self.opt.zero_grad()
        class MseTrainer(Trainer):
            def loss_of(self, x):
                loss = self.model(x).pow(2).mean()
                return loss / self.accum
        x = torch.randn(8, 4)
        t = MseTrainer(nn.Linear(4, 1), 2)
        single = torch.autograd.grad(t.model(x).pow(2).mean(), t.model.weight)[0]
        t.train([x, x])
        """, "GT513", holds="torch.allclose(t.seen[0], single)"), Shape("""
        class Trainer:
            def __init__(self, model, accum):
                self.model, self.accum = model, accum
                self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
                self.seen = []
            def loss_of(self, x):
                raise NotImplementedError
            def train(self, data):
                for i, x in enumerate(data):
                    loss = self.loss_of(x)
                    loss.backward()
                    if (i + 1) % self.accum == 0:
                        self.seen.append(self.model.weight.grad.clone())
                        self.opt.step()
                        self.opt.zero_grad()
        class MseTrainer(Trainer):
            def loss_of(self, x):
                return self.model(x).pow(2).mean()
        x = torch.randn(8, 4)
        t = MseTrainer(nn.Linear(4, 1), 2)
        single = torch.autograd.grad(t.model(x).pow(2).mean(), t.model.weight)[0]
        t.train([x, x])
        """, "GT513", line=11, holds="torch.allclose(t.seen[0], 2 * single)")),
    # Deep_RL_with_pytorch (`7_1_GAIL_ver_A.ipynb`): GAIL's reward
    # `d_reward = -torch.log(torch.sigmoid(self.dis_net(s, a))) + ...` is handed back as
    # `d_reward.detach()`: no backward ever runs through the log. Twin: the discriminator's
    # loss returns the log of the sigmoid on the graph: NaN gradients where it underflows
    "log-of-sigmoid-reward-read-only-detached": (Shape("""
        dis = nn.Linear(4, 1)
        policy = nn.Linear(4, 1)
        opt = torch.optim.SGD(list(dis.parameters()) + list(policy.parameters()), lr=0.1)
        def reward_of(s):
            r = -torch.log(torch.sigmoid(dis(s)))
            return r.detach()
        s = torch.randn(8, 4) * 100
        r = reward_of(s).clamp(max=10.0)
        loss = -(policy(s) * r).mean() + F.softplus(-dis(s)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        """, "GT756", holds="torch.isfinite(dis.weight).all()"), Shape("""
        dis = nn.Linear(4, 1)
        policy = nn.Linear(4, 1)
        opt = torch.optim.SGD(list(dis.parameters()) + list(policy.parameters()), lr=0.1)
        def dis_loss_of(s):
            r = -torch.log(torch.sigmoid(dis(s)))
            return r.mean()
        s = torch.randn(8, 4) * 1000
        loss = dis_loss_of(s) - policy(s).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        """, "GT756", line=5, holds="not torch.isfinite(dis.weight).all()")),
    # recurrent-memory-transformer-pytorch (`forward`, memory-replay backprop): a module's
    # forward backwards each segment's loss and sums the segments into `total_loss`, made
    # before its loop and returned: one batch's graphs, made anew by the next call. Twin: the
    # same sum in a training function stepping after every backward: the returned total keeps
    # every step's graph
    "segment-losses-summed-in-a-forward-that-backwards-them": (Shape("""
        class Replay(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(4, 4)
            def forward(self, segments):
                total_loss = 0.
                for seg in segments:
                    loss = self.net(seg).pow(2).mean()
                    loss.backward()
                    total_loss += loss
                return total_loss
        model = Replay()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for batch in torch.randn(3, 2, 8, 4):
            total = model(batch)
            opt.step()
            opt.zero_grad()
        """, "GT505", holds="float(total) > 0"), Shape("""
        net = nn.Linear(4, 4)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        def train_epoch(batches):
            total_loss = 0.
            for seg in batches:
                loss = net(seg).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                total_loss += loss
            return total_loss
        total = train_epoch(torch.randn(3, 8, 4))
        """, "GT505", line=10, holds="total.grad_fn is not None")),
    # recurrent-memory-transformer-pytorch: each pass of the replay loop takes another memory
    # tensor from the buffer (the loop's own target), backwards into it and copies its `.grad`
    # into a running buffer: a new tensor every pass, whose `.grad` holds this pass's gradient
    # alone. Twin: the same copy from one tensor made before the loop: its `.grad` sums every
    # pass's gradient
    "gradient-of-each-passs-own-tensor-copied": (Shape("""
        net = nn.Linear(4, 4)
        mems = [torch.randn(2, 4) for _ in range(3)]
        carry = torch.ones(2, 4)
        ok = []
        for mem in mems:
            mem.requires_grad_()
            before = carry.clone()
            net(mem).backward(carry)
            carry.copy_(mem.grad.data)
            ok.append(torch.allclose(mem.grad, before @ net.weight))
        """, "GT520", holds="all(ok)"), Shape("""
        net = nn.Linear(4, 4)
        mem = torch.randn(2, 4, requires_grad=True)
        carry = torch.ones(2, 4)
        ok = []
        for _ in range(3):
            before = carry.clone()
            net(mem).backward(carry)
            carry.copy_(mem.grad.data)
            ok.append(torch.allclose(mem.grad, before @ net.weight))
        """, "GT520", line=7, holds="not all(ok)")),
    # granite-tsfm (`toolkit/conformal.py`): `get_beta(..., weights=None, beta_prior=None)`
    # rebinds `weights = torch.ones(W)` only when it is None and turns `beta_prior` (not
    # passed) into numbers in another branch; the betas are built from the weights the caller
    # hands in, a parameter. Twin: the numbers are made from the weights themselves: nothing
    # of the loss is left on the graph
    "default-rebound-in-one-branch-and-a-cut-prior-in-another": (Shape("""
        def get_beta(test, observed, weights=None, prior=None):
            if prior is not None:
                a, b = map(float, prior)
            else:
                a, b = 1.0, 0.0
            if weights is None:
                weights = torch.ones(observed.shape[1])
            betas = (weights.unsqueeze(0) * (observed <= test.unsqueeze(1))).sum(1)
            return (betas + a) / (weights.sum() + a + b)
        w = nn.Parameter(torch.full((5,), 0.5))
        opt = torch.optim.SGD([w], lr=0.01)
        for _ in range(2):
            loss = torch.sort(get_beta(torch.randn(4), torch.randn(4, 5), weights=w))[0].sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT102", holds="w.grad is not None"), Shape("""
        def get_beta(test, observed, weights=None):
            if weights is None:
                weights = torch.ones(observed.shape[1])
            a, b = map(float, weights[:2])
            betas = (observed <= test.unsqueeze(1)).float().sum(1)
            return (betas + a) / (observed.shape[1] + a + b)
        w = nn.Parameter(torch.full((5,), 0.5))
        opt = torch.optim.SGD([w], lr=0.01)
        for _ in range(2):
            loss = torch.sort(get_beta(torch.randn(4), torch.randn(4, 5), weights=w))[0].sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT102", line=4, raises=(RuntimeError, "does not require grad"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


# Two shapes that need a second file of the project (the import is what the checker missed).
RAINDROP_MODELS = '''
import torch
import torch.nn as nn


class GRU_unit_cluster(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.gate = nn.Linear(2 * dim, dim)

    def forward(self, h, x):
        return torch.sigmoid(self.gate(torch.cat([h, x], -1)))


def GRU_step(net, x):
    return net(x)


class Classifier(nn.Module):
    def __init__(self, dim, update):
        super().__init__()
        self.update = update
        self.out = nn.Linear(dim, 2)

    def forward(self, x):
        return self.out(self.update(x, x))
'''
# Raindrop (`baselines/DGM2_baseline.py`): `gru_update = GRU_unit_cluster(10, n)`, a module
# class of the sibling `models.py`, built once per run and handed to the model: an object,
# not an output with a graph. Twin: `GRU_step(enc, x0)`, a function of that file running a
# module: its output, made once before the loop, is backwarded on every pass
RAINDROP_TRAIN = {"silent": '''
import torch
from u36b_models import GRU_unit_cluster, Classifier


def evaluate(model, x):
    return model(x)


for run in range(2):
    gru_update = GRU_unit_cluster(4)
    model = Classifier(4, gru_update)
    model = model.cpu()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for x in torch.randn(3, 8, 4):
        out = evaluate(model, x)
        loss = torch.nn.functional.cross_entropy(out, torch.zeros(8, dtype=torch.long))
        opt.zero_grad()
        loss.backward()
        opt.step()
''', "twin": '''
import torch
from u36b_models import GRU_step, GRU_unit_cluster, Classifier

enc = torch.nn.Linear(4, 4)
h = GRU_step(enc, torch.randn(8, 4))
model = Classifier(4, GRU_unit_cluster(4))
opt = torch.optim.Adam(list(model.parameters()) + list(enc.parameters()), lr=1e-3)
for x in torch.randn(3, 8, 4):
    loss = (model(x) * h.sum()).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
'''}
AUG = '''
import torch


class AdaptiveAugment:
    def __init__(self, target):
        self.target = target
        self.buf = torch.zeros(2)
        self.p = 0

    @torch.no_grad()
    def tune(self, real_pred):
        self.buf += torch.tensor((torch.sign(real_pred).sum().item(), real_pred.shape[0]))
        self.p = min(1, max(0, self.p + {step}))
        return self.p
'''
# alias-free-gan-pytorch (`train.py`): `ada_aug_p = ada_augment.tune(real_pred)`, a method of
# a class of `stylegan2/non_leaking.py` run on an instance made in the script. Twin: the
# method stores the prediction (an argument keeps its history under no_grad)
GAN_TRAIN = '''
import torch
from torch import nn
from u36b_aug import AdaptiveAugment

generator, discriminator = nn.Linear(4, 4), nn.Linear(4, 1)
g_optim = torch.optim.Adam(generator.parameters())
d_optim = torch.optim.Adam(discriminator.parameters())
ada_augment = AdaptiveAugment(0.6)
for real_img in torch.randn(3, 8, 4):
    real_pred = torch.sigmoid(discriminator(real_img))
    fake_pred = discriminator(generator(torch.randn(8, 4)).detach())
    d_loss = nn.functional.softplus(fake_pred).mean() + nn.functional.softplus(-real_pred).mean()
    discriminator.zero_grad()
    d_loss.backward()
    d_optim.step()
    ada_aug_p = ada_augment.tune(real_pred)
    fake_img = generator(torch.randn(8, 4)) * (1 - ada_aug_p)
    g_loss = nn.functional.softplus(-discriminator(fake_img)).mean()
    generator.zero_grad()
    g_loss.backward()
    g_optim.step()
'''


def _project(root, files: dict[str, str]):  # type: ignore[no-untyped-def]
    for name, text in files.items():
        (root / name).write_text(text.lstrip("\n"))
    return root / "train.py"


def _run(path, monkeypatch, mods: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    import runpy
    import sys
    monkeypatch.syspath_prepend(str(path.parent))
    try:
        runpy.run_path(str(path), run_name="__main__")
    finally:
        for m in mods:
            sys.modules.pop(m, None)


def _codes(path, code: str) -> list[int]:  # type: ignore[no-untyped-def]
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    return [f.line for f in check_paths([str(path)], Settings()).findings if f.code == code]


def test_module_class_of_a_sibling_file_built_before_the_loop_is_silent(tmp_path, monkeypatch):
    path = _project(tmp_path, {"u36b_models.py": RAINDROP_MODELS,
                               "train.py": RAINDROP_TRAIN["silent"]})
    assert _codes(path, "GT507") == []
    _run(path, monkeypatch, ("u36b_models",))


def test_output_of_a_sibling_files_function_made_before_the_loop_is_reported(tmp_path,
                                                                            monkeypatch):
    path = _project(tmp_path, {"u36b_models.py": RAINDROP_MODELS,
                               "train.py": RAINDROP_TRAIN["twin"]})
    assert _codes(path, "GT507") == [5]
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        _run(path, monkeypatch, ("u36b_models",))


def test_number_tuned_by_a_no_grad_method_of_another_file_is_silent(tmp_path, monkeypatch):
    path = _project(tmp_path, {"u36b_aug.py": AUG.format(step="0.01"), "train.py": GAN_TRAIN})
    assert _codes(path, "GT509") == []
    _run(path, monkeypatch, ("u36b_aug",))


def test_prediction_stored_by_a_no_grad_method_of_another_file_is_reported(tmp_path,
                                                                           monkeypatch):
    aug = AUG.replace("self.p = min(1, max(0, self.p + {step}))", "self.p = real_pred")
    path = _project(tmp_path, {"u36b_aug.py": aug, "train.py": GAN_TRAIN})
    assert _codes(path, "GT509") == [16]
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        _run(path, monkeypatch, ("u36b_aug",))
