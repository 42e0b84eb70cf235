"""Shapes that fired wrongly on the projects of docs/triage/unseen29a.md (session 29), each in
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
    # prompt-to-prompt (DDS_zeroshot.py): the source latent is encoded under `no_grad`, then
    # `z_taregt = z_source.clone(); z_taregt.requires_grad = True` and the loss is built from
    # it: the clone is a new leaf that requires grad. Twin: no flag on the clone
    "flag-set-on-a-clone-of-a-no-grad-value": (Shape("""
        enc = nn.Linear(4, 4)
        with torch.no_grad():
            source = enc(torch.randn(2, 4))
        target = source.clone()
        target.requires_grad = True
        opt = torch.optim.SGD([target], lr=0.1)
        for _ in range(2):
            loss = (target - source * 2).pow(2).sum()
            opt.zero_grad()
            (10 * loss).backward()
            opt.step()
        assert target.grad is not None
        """, "GT201"), Shape("""
        enc = nn.Linear(4, 4)
        with torch.no_grad():
            source = enc(torch.randn(2, 4))
        target = source.clone()
        other = torch.zeros(1)
        other.requires_grad = True
        loss = (target - source * 2).pow(2).sum()
        (10 * loss).backward()
        """, "GT201", line=2, raises=(RuntimeError, "does not require grad"))),
    # AoANet (train.py, misc/utils.py): `optimizer = utils.ReduceLROnPlateau(optimizer, ...)`,
    # the project's wrapper whose `step()` steps the optimizer and whose `scheduler_step(val)`
    # steps torch's scheduler; `optimizer.step()` takes no metric. Twin: torch's own class
    "project-class-named-like-torch-plateau": (Shape("""
        class ReduceLROnPlateau:
            def __init__(self, optimizer, factor=0.5, patience=3):
                self.optimizer = optimizer
                self.scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
                    optimizer, factor=factor, patience=patience)
            def step(self):
                self.optimizer.step()
            def scheduler_step(self, val):
                self.scheduler.step(val)
        net = nn.Linear(2, 1)
        optimizer = ReduceLROnPlateau(torch.optim.SGD(net.parameters(), lr=0.1), factor=0.5)
        for _ in range(2):
            net(torch.randn(3, 2)).pow(2).mean().backward()
            optimizer.step()
        optimizer.scheduler_step(1.0)
        """, "GT531"), Shape("""
        net = nn.Linear(2, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5)
        for _ in range(2):
            net(torch.randn(3, 2)).pow(2).mean().backward()
            opt.step()
            sched.step()
        """, "GT531", line=7, raises=(TypeError, "metrics"))),
    # LlamaGen (tokenizer/tokenizer_image/vq_train.py): `optimizer_disc` built over
    # `vq_loss.discriminator.parameters()`, then `vq_loss = DDP(vq_loss.to(device))` and the clip
    # of `vq_loss.module.discriminator.parameters()`: the wrapper's `.module` is the object the
    # optimizer was built on. Twin: the clip names the other part of that object
    "clip-through-the-wrapper-of-the-stepped-part": (Shape("""
        class Critic(nn.Module):
            def __init__(self):
                super().__init__()
                self.disc = nn.Linear(2, 1)
                self.proj = nn.Linear(2, 2)
        crit = Critic()
        opt_d = torch.optim.SGD(crit.disc.parameters(), lr=0.1)
        crit = nn.DataParallel(crit.to("cpu"))
        for _ in range(2):
            opt_d.zero_grad()
            crit.module.disc(torch.randn(3, 2)).pow(2).mean().mul(100).backward()
            torch.nn.utils.clip_grad_norm_(crit.module.disc.parameters(), 0.01)
            opt_d.step()
        """, "GT549"), Shape("""
        class Critic(nn.Module):
            def __init__(self):
                super().__init__()
                self.disc = nn.Linear(2, 1)
                self.proj = nn.Linear(2, 2)
        crit = Critic()
        opt_d = torch.optim.SGD(crit.disc.parameters(), lr=0.1)
        crit = nn.DataParallel(crit.to("cpu"))
        opt_d.zero_grad()
        crit.module.disc(torch.randn(3, 2)).pow(2).mean().mul(100).backward()
        torch.nn.utils.clip_grad_norm_(crit.module.proj.parameters(), 0.01)
        opt_d.step()
        """, "GT549", line=11, holds="crit.module.disc.weight.grad.norm() > 0.01")),
    # radtts (loss.py): `self.loss_fns = {}` filled with `AttributePredictionLoss('f0',
    # f0_model_config, loss_weights['f0_loss_weight'])`, a loss module of the file that keeps
    # only its arguments (a name, a weight): nothing to register. Twin: the same dict of a
    # class that builds a layer
    "plain-dict-of-parameter-free-losses": (Shape("""
        class TermLoss(nn.Module):
            def __init__(self, name, config, weight, sigma=1.0):
                super().__init__()
                self.name = name
                self.weight = weight
                self.group = config["group"]
            def forward(self, out):
                return {"loss_" + self.name: out.pow(2).mean() * self.weight}
        class Total(nn.Module):
            def __init__(self, config, weights):
                super().__init__()
                self.fns = {}
                self.fns["f0"] = TermLoss("f0", config, weights["f0_weight"])
                self.fns["dur"] = TermLoss("dur", config, weights["dur_weight"])
            def forward(self, outs):
                return sum(v for k in outs for v in self.fns[k](outs[k]).values())
        total = Total({"group": 1}, {"f0_weight": 0.5, "dur_weight": 1.0})
        assert len(total.state_dict()) == 0
        total({"f0": torch.ones(3), "dur": torch.ones(3)})
        """, "GT401"), Shape("""
        class TermLoss(nn.Module):
            def __init__(self, name, weight):
                super().__init__()
                self.name = name
                self.proj = nn.Linear(3, 3)
            def forward(self, out):
                return {"loss_" + self.name: self.proj(out).pow(2).mean()}
        class Total(nn.Module):
            def __init__(self, weights):
                super().__init__()
                self.fns = {}
                self.fns["f0"] = TermLoss("f0", weights["f0_weight"])
            def forward(self, outs):
                return sum(v for k in outs for v in self.fns[k](outs[k]).values())
        total = Total({"f0_weight": 0.5})
        """, "GT401", line=11, holds="len(list(total.parameters())) == 0")),
    # LlamaGen (tokenizer/tokenizer_image/vq_train.py): `loss_gen = vq_loss(..., recons_imgs,
    # optimizer_idx=0)`, backward, the generator's step, then `loss_disc = vq_loss(...,
    # recons_imgs, optimizer_idx=1)`, backward, the discriminator's step: one object of another
    # file switched by a constant, whose discriminator branch detaches. Twin: the second call
    # passes the same constant: the generator's freed graph again
    "one-foreign-loss-switched-by-a-constant": (Shape("""
        from tests.lint._switched_loss import SwitchedLoss
        gen = nn.Linear(2, 2)
        vq_loss = SwitchedLoss()
        opt = torch.optim.SGD(gen.parameters(), lr=0.1)
        opt_disc = torch.optim.SGD(vq_loss.disc.parameters(), lr=0.1)
        for _ in range(2):
            imgs = torch.randn(3, 2)
            opt.zero_grad()
            recons = gen(imgs)
            loss_gen = vq_loss(imgs, recons, optimizer_idx=0)
            loss_gen.backward()
            opt.step()
            opt_disc.zero_grad()
            loss_disc = vq_loss(imgs, recons, optimizer_idx=1)
            loss_disc.backward()
            opt_disc.step()
        """, "GT509"), Shape("""
        from tests.lint._switched_loss import SwitchedLoss
        gen = nn.Linear(2, 2)
        vq_loss = SwitchedLoss()
        opt = torch.optim.SGD(gen.parameters(), lr=0.1)
        opt_disc = torch.optim.SGD(vq_loss.disc.parameters(), lr=0.1)
        imgs = torch.randn(3, 2)
        recons = gen(imgs)
        loss_gen = vq_loss(imgs, recons, optimizer_idx=0)
        loss_gen.backward()
        opt.step()
        loss_disc = vq_loss(imgs, recons, optimizer_idx=0)
        loss_disc.backward()
        opt_disc.step()
        """, "GT509", line=11, raises=(RuntimeError, "second time"))),
    # PPLM (paper_code/run_gpt2.py): `context = torch.tensor(context).unsqueeze(0)`, the model's
    # last-position softmax, `nll = -torch.log(log_probs[:, target])`, `nll.backward()`: a
    # batch of one sample made here and one column picked is one element. Twin: the same
    # column of a batch of several sequences
    "one-column-of-a-batch-of-one-built-here": (Shape("""
        lm = nn.Linear(3, 5)
        def score(tokens, target):
            context = torch.tensor(tokens).unsqueeze(0)
            logits = lm(context)
            probs = F.softmax(logits, dim=-1)
            nll = -torch.log(probs[:, target])
            nll.backward()
            return lm.weight.grad
        assert score([0.5, 1.0, 2.0], 3) is not None
        """, "GT715"), Shape("""
        lm = nn.Linear(3, 5)
        def score(batch, target):
            context = torch.tensor(batch)
            logits = lm(context)
            probs = F.softmax(logits, dim=-1)
            nll = -torch.log(probs[:, target])
            nll.backward()
        score([[0.5, 1.0, 2.0], [1.0, 0.0, 1.0]], 3)
        """, "GT715", line=7, raises=(RuntimeError, "scalar outputs"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
