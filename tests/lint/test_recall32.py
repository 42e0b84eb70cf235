"""recall32: forward-hook stores (NOTE [hook stores]) read by the GT1 tracer and by GT228, one
element of a tuple a module's `forward` cuts (NOTE [unpacked cut element]), and GT109 with the
focus on one owner of a shared optimizer (NOTE [one owner cut]); GT776, a standardisation with
no epsilon under the deviation; GT758 through an `nn.Sequential()` filled by `add_module`
(NOTE [added layers]) and a loss called as `criterion.forward(...)`. Every snippet runs on real
torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
'''

DISTILLER = '''
        class Distiller:
            def __init__(self, student, teacher):
                self.student, self.teacher = student, teacher
                self.s_cache, self.t_cache = {}, {}
                student[0].register_forward_hook(self._keep(self.s_cache))
                teacher[0].register_forward_hook(self._keep(self.t_cache))

            @staticmethod
            def _keep(cache):
                def fn(module, inputs, output):
                    cache["f"] = output
                return fn

'''

STEP = '''
            def step(self, x, y, opt):
                pred = self.student(x)
                feat = self.feature_loss(x)
                loss = F.cross_entropy(pred, y) + feat
                opt.zero_grad()
                loss.backward()
                opt.step()
                return feat


        student = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 3))
        teacher = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 3)).requires_grad_(False)
        d = Distiller(student, teacher)
        opt = torch.optim.SGD(student.parameters(), lr=0.1)
        feat = d.step(torch.randn(5, 4), torch.randint(0, 3, (5,)), opt)
'''

EXTRACTOR = '''
        class Body(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Linear(6, 4)
                self.mix = nn.Sequential(nn.Linear(4, 4), nn.GELU())

            def forward(self, x):
                return self.mix(self.embed(x)).mean(1)


        class Extractor(nn.Module):
            def __init__(self, body):
                super().__init__()
                self.body = body
                self.latents = None
                self.body.mix.register_forward_hook(self._hook)

            def _hook(self, module, inputs, output):
                self.latents = output{KEEP}

            def forward(self, x):
                self.latents = None
                pred = self.body(x)
                return pred, self.latents


        ext = Extractor(Body())
        head = nn.Linear(4, 4)
        opt = torch.optim.Adam(list(ext.parameters()) + list(head.parameters()), lr=1e-3)
        _, tokens = ext(torch.randn(2, 5, 6))
        logits = tokens.mean(1) @ head(torch.randn(2, 4)).t()
        loss = F.cross_entropy(logits, torch.arange(2))
        opt.zero_grad()
        loss.backward()
        opt.step()
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # A feature-distillation term read from forward-hook caches: the student re-run under
    # no_grad (only for its hook) leaves constants in its cache, so the term trains nothing
    # (YOLO-Master#240). Look-alike: only the teacher re-runs under no_grad; the student's
    # cache holds the output of its forward with grad.
    "hook-cache-filled-under-no-grad": (Shape(DISTILLER + """
            def feature_loss(self, x):
                with torch.no_grad():
                    self.teacher(x)
                return F.mse_loss(self.s_cache["f"], self.t_cache["f"])
        """ + STEP, "GT228", holds="feat.requires_grad"), Shape(DISTILLER + """
            def feature_loss(self, x):
                with torch.no_grad():
                    self.student(x)
                    self.teacher(x)
                return F.mse_loss(self.s_cache["f"], self.t_cache["f"])
        """ + STEP, "GT228", 17, holds="not feat.requires_grad")),
    # A forward hook keeps a detached copy of a layer's output, which `forward` hands back
    # next to its prediction: the loss on that element reaches the extractor's layers only
    # through the detach (CoCa-pytorch#6), while the head, stepped by the same optimizer,
    # keeps the loss live. Look-alike: the hook keeps the output itself.
    "hook-store-detached-element": (Shape(EXTRACTOR.replace("{KEEP}", ""), "GT109",
                                          holds="ext.body.embed.weight.grad is not None"),
                                    Shape(EXTRACTOR.replace("{KEEP}", ".clone().detach()"),
                                          "GT109", 19,
                                          holds="ext.body.embed.weight.grad is None")),
    # One optimizer over actor and critic, each loss its own backward: the critic's target
    # is detached from the actor on purpose and the actor's loss reaches it live (silent).
    # Twin: the actor is reached by the only loss through `.detach()` alone.
    "one-owner-cut": (Shape("""
        actor, critic = nn.Linear(3, 2), nn.Linear(5, 1)
        opt = torch.optim.Adam(list(actor.parameters()) + list(critic.parameters()), lr=1e-3)
        s = torch.randn(4, 3)
        a = actor(s)
        q = critic(torch.cat([s, a.detach()], 1))
        critic_loss = F.mse_loss(q, torch.zeros(4, 1))
        opt.zero_grad()
        critic_loss.backward()
        opt.step()
        actor_loss = -critic(torch.cat([s, actor(s)], 1)).mean()
        opt.zero_grad()
        actor_loss.backward()
        opt.step()
        """, "GT109", holds="actor.weight.grad is not None"), Shape("""
        actor, critic = nn.Linear(3, 2), nn.Linear(5, 1)
        opt = torch.optim.Adam(list(actor.parameters()) + list(critic.parameters()), lr=1e-3)
        s = torch.randn(4, 3)
        a = actor(s)
        q = critic(torch.cat([s, a.detach()], 1))
        loss = -q.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        """, "GT109", 5, holds="actor.weight.grad is None")),
    # Advantages standardised by their own std: an episode whose rewards are all equal has
    # std 0, so (adv - mean) / std is 0/0 = NaN and so is every gradient (rllib). Look-alike:
    # the usual `+ 1e-8` under the deviation.
    "standardised-by-bare-std": (Shape("""
        policy = nn.Linear(4, 2)
        dist = torch.distributions.Categorical(logits=policy(torch.randn(6, 4)))
        actions = dist.sample()
        rewards = torch.zeros(6)
        adv = (rewards - rewards.mean()) / (rewards.std() + 1e-8)
        loss = -(dist.log_prob(actions) * adv).mean()
        loss.backward()
        """, "GT776", holds="not policy.weight.grad.isnan().any()"), Shape("""
        policy = nn.Linear(4, 2)
        dist = torch.distributions.Categorical(logits=policy(torch.randn(6, 4)))
        actions = dist.sample()
        rewards = torch.zeros(6)
        adv = (rewards - rewards.mean()) / rewards.std()
        loss = -(dist.log_prob(actions) * adv).mean()
        loss.backward()
        """, "GT776", 5, holds="policy.weight.grad.isnan().all()")),
    # A one-frame utterance: the unbiased std over one element is NaN (fairseq).
    "standardised-single-frame": (Shape("""
        def mv_norm(features):
            return (features - features.mean(dim=0)) / (features.std(dim=0) + 1e-5)

        enc = nn.Linear(5, 3)
        loss = F.cross_entropy(enc(mv_norm(torch.randn(3, 5))), torch.tensor([0, 1, 2]))
        loss.backward()
        """, "GT776", holds="not enc.weight.grad.isnan().any()"), Shape("""
        def mv_norm(features):
            mean = features.mean(dim=0)
            std = features.std(dim=0)
            return (features - mean) / std

        enc = nn.Linear(5, 3)
        loss = F.cross_entropy(enc(mv_norm(torch.randn(1, 5))), torch.tensor([0]))
        loss.backward()
        """, "GT776", 3, holds="enc.weight.grad.isnan().all()")),
    # An nn.Sequential filled by add_module, its last layer a Softmax, and the loss module
    # called through `.forward`: cross-entropy normalises twice, so the loss cannot go below
    # log(1 + 9/e) for 10 classes (the tutorial's case). Look-alike: the last layer added is
    # the Linear (logits).
    "sequential-add-module-softmax": (Shape("""
        def build():
            model = nn.Sequential()
            model.add_module("fc", nn.Linear(20, 10))
            model.add_module("softmax", nn.Softmax(dim=1))
            model.add_module("out", nn.Linear(10, 10))
            return model

        model = build()
        criterion = nn.CrossEntropyLoss()
        loss = criterion.forward(model.forward(torch.randn(8, 20)), torch.randint(0, 10, (8,)))
        loss.backward()
        """, "GT758"), Shape("""
        def build():
            model = nn.Sequential()
            model.add_module("fc", nn.Linear(20, 10))
            model.add_module("softmax", nn.Softmax(dim=1))
            return model

        model = build()
        criterion = nn.CrossEntropyLoss()
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        x, y = torch.randn(8, 20), torch.randint(0, 10, (8,))
        for _ in range(200):
            opt.zero_grad()
            loss = criterion.forward(model.forward(x), y)
            loss.backward()
            opt.step()
        """, "GT758", 4, holds="loss.item() > __import__('math').log(1 + 9 / __import__('math').e) - 1e-3")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
