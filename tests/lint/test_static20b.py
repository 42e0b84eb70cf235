"""Readings of docs/triage/static20b.md (freezing, optimizer wiring, numerics...), each in
spellings the real-world cases do not hold, next to correct look-alikes that stay silent.
Every snippet runs on real torch."""
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

# (silent look-alike, buggy twin)
SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT548 (DME, SciTSR: `F.dropout(out, p=...)` in forward): here in a helper function of
    # the file that a module's forward calls, `dropout2d`, put in eval mode by
    # `train(False)`. Look-alike: the helper is handed the flag positionally
    "functional-dropout-in-helper": (Shape("""
        def spatial_drop(h, rate, training):
            return F.dropout2d(h, rate, training)
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 4, 3)
            def forward(self, x):
                return spatial_drop(self.conv(x), 0.5, self.training)
        net = Block()
        net.train(False)
        x = torch.randn(2, 3, 8, 8)
        a, b = net(x), net(x)
        """, "GT548", holds="torch.equal(a, b)"), Shape("""
        def spatial_drop(h, rate):
            return F.dropout2d(h, rate)
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 4, 3)
            def forward(self, x):
                return spatial_drop(self.conv(x), 0.5)
        net = Block()
        net.train(False)
        x = torch.randn(2, 3, 8, 8)
        a, b = net(x), net(x)
        """, "GT548", 2, holds="not torch.equal(a, b)")),
    # GT548: in another method than forward, `nn.functional.dropout` with `p` positional,
    # the evaluation in a function. Look-alike: the call sits under `if self.training:`
    "functional-dropout-in-encode-method": (Shape("""
        class Encoder(nn.Module):
            def __init__(self, p=0.4):
                super().__init__()
                self.p = p
                self.emb = nn.Embedding(50, 16)
            def encode(self, ids):
                h = self.emb(ids)
                if self.training:
                    h = nn.functional.dropout(h, self.p)
                return h.mean(1)
            def forward(self, ids):
                return self.encode(ids)
        def evaluate(model, ids):
            model.eval()
            with torch.no_grad():
                return model(ids), model(ids)
        a, b = evaluate(Encoder(), torch.randint(0, 50, (4, 7)))
        """, "GT548", holds="torch.equal(a, b)"), Shape("""
        class Encoder(nn.Module):
            def __init__(self, p=0.4):
                super().__init__()
                self.p = p
                self.emb = nn.Embedding(50, 16)
            def encode(self, ids):
                h = self.emb(ids)
                h = nn.functional.dropout(h, self.p)
                return h.mean(1)
            def forward(self, ids):
                return self.encode(ids)
        def evaluate(model, ids):
            model.eval()
            with torch.no_grad():
                return model(ids), model(ids)
        a, b = evaluate(Encoder(), torch.randint(0, 50, (4, 7)))
        """, "GT548", 8, holds="not torch.equal(a, b)")),
    # GT548 look-alike: `training=self.training` spelled as a keyword; twin: a plain
    # `torch.nn.functional.dropout` on the attention weights of a nested module
    "functional-dropout-on-attention": (Shape("""
        class Attn(nn.Module):
            def __init__(self):
                super().__init__()
                self.qk = nn.Linear(8, 8)
            def forward(self, x):
                w = (self.qk(x) @ x.transpose(-2, -1)).softmax(-1)
                return torch.nn.functional.dropout(w, p=0.3, training=self.training) @ x
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.attn = Attn()
            def forward(self, x):
                return self.attn(x).sum(1)
        net = Net().eval()
        x = torch.randn(2, 5, 8)
        a, b = net(x), net(x)
        """, "GT548", holds="torch.equal(a, b)"), Shape("""
        class Attn(nn.Module):
            def __init__(self):
                super().__init__()
                self.qk = nn.Linear(8, 8)
            def forward(self, x):
                w = (self.qk(x) @ x.transpose(-2, -1)).softmax(-1)
                return torch.nn.functional.dropout(w, p=0.3) @ x
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.attn = Attn()
            def forward(self, x):
                return self.attn(x).sum(1)
        net = Net()
        net.eval()
        x = torch.randn(2, 5, 8)
        a, b = net(x), net(x)
        """, "GT548", 7, holds="not torch.equal(a, b)")),
    # GT438 (ColossalAI DreamBooth: `text_encoder.requires_grad_(True)`, then an optimizer
    # over `unet` only): unfreezing a module or zeroing its gradients says it is meant to
    # train; here in a function, `requires_grad_()` with no argument. Look-alike: the module
    # is frozen with `requires_grad_(False)`
    "unfrozen-module-left-out-of-optimizer": (Shape("""
        def finetune(backbone, steps=3):
            head = nn.Linear(4, 2)
            head.requires_grad_(False)
            opt = torch.optim.SGD(backbone.parameters(), lr=0.1)
            before = head.weight.detach().clone()
            for _ in range(steps):
                loss = head(backbone(torch.randn(8, 4))).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            grad = None if head.weight.grad is None else head.weight.grad.abs().sum().item()
            return not torch.equal(head.weight, before), grad
        got = finetune(nn.Linear(4, 4))
        """, "GT438", holds="got == (False, None)"), Shape("""
        def finetune(backbone, steps=3):
            head = nn.Linear(4, 2)
            head.requires_grad_()
            opt = torch.optim.SGD(backbone.parameters(), lr=0.1)
            before = head.weight.detach().clone()
            for _ in range(steps):
                loss = head(backbone(torch.randn(8, 4))).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            grad = None if head.weight.grad is None else head.weight.grad.abs().sum().item()
            return not torch.equal(head.weight, before), grad
        got = finetune(nn.Linear(4, 4))
        """, "GT438", 4, holds="got[0] is False and got[1] > 0")),
    # GT438: a script whose loop zeroes the second module's gradients itself
    # (`decoder.zero_grad()`) while the optimizer holds the encoder only. Look-alike: both
    # are in the optimizer
    "zeroed-module-left-out-of-optimizer": (Shape("""
        encoder = nn.Linear(6, 3)
        decoder = nn.Linear(3, 6)
        opt = torch.optim.Adam(list(encoder.parameters()) + list(decoder.parameters()), lr=0.01)
        before = decoder.weight.detach().clone()
        for _ in range(3):
            x = torch.randn(5, 6)
            loss = F.mse_loss(decoder(encoder(x)), x)
            opt.zero_grad()
            decoder.zero_grad()
            loss.backward()
            opt.step()
        """, "GT438", holds="not torch.equal(decoder.weight, before)"), Shape("""
        encoder = nn.Linear(6, 3)
        decoder = nn.Linear(3, 6)
        opt = torch.optim.Adam(encoder.parameters(), lr=0.01)
        before = decoder.weight.detach().clone()
        for _ in range(3):
            x = torch.randn(5, 6)
            loss = F.mse_loss(decoder(encoder(x)), x)
            opt.zero_grad()
            decoder.zero_grad()
            loss.backward()
            opt.step()
        """, "GT438", 3, holds="torch.equal(decoder.weight, before)")),
    # GT549 (OpenSpiel `_pi_update`: the baseline head's gradients clipped before the
    # policy optimizer steps): here a GAN script clipping the discriminator's gradients by
    # value before the generator's step. Look-alike: it clips the generator's
    "clip-of-other-model-in-gan": (
        Shape("""
        G, D = nn.Linear(4, 4), nn.Linear(4, 1)
        opt_g = torch.optim.SGD(G.parameters(), lr=0.1)
        opt_d = torch.optim.SGD(D.parameters(), lr=0.1)
        for _ in range(2):
            opt_g.zero_grad()
            g_loss = -D(G(torch.randn(8, 4) * 100)).mean()
            g_loss.backward()
            torch.nn.utils.clip_grad_value_(G.parameters(), 0.01)
            opt_g.step()
        """, "GT549", holds="max(p.grad.abs().max().item() for p in G.parameters()) <= 0.01"),
        Shape("""
        G, D = nn.Linear(4, 4), nn.Linear(4, 1)
        opt_g = torch.optim.SGD(G.parameters(), lr=0.1)
        opt_d = torch.optim.SGD(D.parameters(), lr=0.1)
        for _ in range(2):
            opt_g.zero_grad()
            g_loss = -D(G(torch.randn(8, 4) * 100)).mean()
            g_loss.backward()
            torch.nn.utils.clip_grad_value_(D.parameters(), 0.01)
            opt_g.step()
        """, "GT549", 8, holds="max(p.grad.abs().max().item() for p in G.parameters()) > 0.01")),
    # GT549: in a function, the optimizer over a list of two modules, the clip spelled with
    # keywords over a third (an auxiliary head with its own optimizer). Look-alike: the clip
    # is followed by both steps
    "clip-keyword-of-aux-head-in-function": (Shape("""
        def train_step(enc, dec, aux, x):
            main_opt = torch.optim.SGD(list(enc.parameters()) + list(dec.parameters()), lr=0.1)
            aux_opt = torch.optim.SGD(aux.parameters(), lr=0.1)
            h = enc(x)
            loss = F.mse_loss(dec(h), x * 50) + aux(h).pow(2).mean()
            main_opt.zero_grad()
            aux_opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(parameters=aux.parameters(), max_norm=0.5)
            main_opt.step()
            aux_opt.step()
            return torch.nn.utils.clip_grad_norm_(enc.parameters(), float("inf")).item()
        norm = train_step(nn.Linear(3, 3), nn.Linear(3, 3), nn.Linear(3, 1), torch.randn(4, 3))
        """, "GT549", holds="norm > 0.5"), Shape("""
        def train_step(enc, dec, aux, x):
            main_opt = torch.optim.SGD(list(enc.parameters()) + list(dec.parameters()), lr=0.1)
            aux_opt = torch.optim.SGD(aux.parameters(), lr=0.1)
            h = enc(x)
            loss = F.mse_loss(dec(h), x * 50) + aux(h).pow(2).mean()
            main_opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(parameters=aux.parameters(), max_norm=0.5)
            main_opt.step()
            return torch.nn.utils.clip_grad_norm_(enc.parameters(), float("inf")).item()
        norm = train_step(nn.Linear(3, 3), nn.Linear(3, 3), nn.Linear(3, 1), torch.randn(4, 3))
        """, "GT549", 8, holds="norm > 0.5")),
    # GT549 look-alike: a submodule of the stepped model is clipped (`net.body` of `net`); twin:
    # an agent's method clips its target network before stepping the online one
    "clip-of-target-network-in-method": (Shape("""
        class Agent:
            def __init__(self):
                self.net = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
                self.target = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
                self.opt = torch.optim.Adam(self.net.parameters(), lr=1e-3)
            def learn(self, x):
                loss = (self.net(x) * 30).pow(2).mean()
                self.opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self.net[0].parameters(), 1.0)
                self.opt.step()
                return self.net[0].weight.grad.norm().item()
        g = Agent().learn(torch.randn(16, 4))
        """, "GT549", holds="g <= 1.0 + 1e-4"), Shape("""
        class Agent:
            def __init__(self):
                self.net = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
                self.target = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
                self.opt = torch.optim.Adam(self.net.parameters(), lr=1e-3)
            def learn(self, x):
                loss = (self.net(x) * 30).pow(2).mean()
                self.opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self.target.parameters(), 1.0)
                self.opt.step()
                return self.net[0].weight.grad.norm().item()
        g = Agent().learn(torch.randn(16, 4))
        """, "GT549", 10, holds="g > 1.0")),
    # GT764 (vision-transformer tutorial: `softmax(dim=-2)` then `@ v`): here `torch.bmm` on
    # 3-d scores normalised with `F.softmax(..., dim=1)` (the query axis). Look-alike: dim=2
    "softmax-over-queries-then-bmm": (Shape("""
        def attend(q, k, v):
            scores = torch.bmm(q, k.transpose(1, 2))
            w = F.softmax(scores, dim=2)
            return torch.bmm(w, v), w
        out, w = attend(torch.randn(2, 5, 4), torch.randn(2, 7, 4), torch.randn(2, 7, 4))
        """, "GT764", holds="torch.allclose(w.sum(-1), torch.ones(2, 5))"), Shape("""
        def attend(q, k, v):
            scores = torch.bmm(q, k.transpose(1, 2))
            w = F.softmax(scores, dim=1)
            return torch.bmm(w, v), w
        out, w = attend(torch.randn(2, 5, 4), torch.randn(2, 7, 4), torch.randn(2, 7, 4))
        """, "GT764", 3, holds="not torch.allclose(w.sum(-1), torch.ones(2, 5))")),
    # GT764 (SKAttention: `nn.Softmax(dim=1)` in `__init__`, `(w * feats).sum(0)` in
    # forward): here attention pooling over time normalised over the feature axis, reported
    # at the constructor. Look-alike: the module normalises over time
    "softmax-module-over-features-then-sum-over-time": (Shape("""
        class Pool(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.score = nn.Linear(d, d)
                self.norm = nn.Softmax(dim=1)
            def forward(self, h):
                a = self.norm(self.score(h))
                return (a * h).sum(1), a
        pooled, a = Pool(6)(torch.randn(3, 9, 6))
        """, "GT764", holds="torch.allclose(a.sum(1), torch.ones(3, 6))"), Shape("""
        class Pool(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.score = nn.Linear(d, d)
                self.norm = nn.Softmax(dim=2)
            def forward(self, h):
                a = self.norm(self.score(h))
                return (a * h).sum(1), a
        pooled, a = Pool(6)(torch.randn(3, 9, 6))
        """, "GT764", 5, holds="not torch.allclose(a.sum(1), torch.ones(3, 6))")),
    # GT764: through an attention dropout module and `torch.matmul`, in a method. Look-alike:
    # the usual last-axis softmax
    "softmax-over-queries-through-dropout": (Shape("""
        class SelfAttention(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.qkv = nn.Linear(d, 3 * d)
                self.drop = nn.Dropout(0.1)
            def forward(self, x):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                probs = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
                probs = self.drop(probs)
                return torch.matmul(probs, v), probs
        out, probs = SelfAttention(4).eval()(torch.randn(2, 6, 4))
        """, "GT764", holds="torch.allclose(probs.sum(-1), torch.ones(2, 6))"), Shape("""
        class SelfAttention(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.qkv = nn.Linear(d, 3 * d)
                self.drop = nn.Dropout(0.1)
            def forward(self, x):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                probs = torch.softmax(q @ k.transpose(-2, -1), dim=-2)
                probs = self.drop(probs)
                return torch.matmul(probs, v), probs
        out, probs = SelfAttention(4).eval()(torch.randn(2, 6, 4))
        """, "GT764", 8, holds="not torch.allclose(probs.sum(-1), torch.ones(2, 6))")),
    # GT550 (deepspeech.pytorch: `model.train()` each epoch, then the validation loop with
    # no `model.eval()`): here in a function, the validation loop inside the `no_grad`
    # block. Look-alike: a helper of the file puts the model in eval mode first
    "validation-after-train-in-function": (Shape("""
        def set_eval(m):
            m.eval()
        def fit(net, train, val):
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            net.train()
            for x, y in train:
                opt.zero_grad()
                F.cross_entropy(net(x), y).backward()
                opt.step()
            bn = net[1].running_mean.clone()
            set_eval(net)
            with torch.no_grad():
                for x, y in val:
                    net(x)
            return torch.equal(bn, net[1].running_mean)
        net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))
        data = [(torch.randn(6, 4), torch.randint(0, 2, (6,)))]
        same = fit(net, data, [(torch.randn(6, 4) + 3, None)])
        """, "GT550", holds="same"), Shape("""
        def fit(net, train, val):
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            net.train()
            for x, y in train:
                opt.zero_grad()
                F.cross_entropy(net(x), y).backward()
                opt.step()
            bn = net[1].running_mean.clone()
            with torch.no_grad():
                for x, y in val:
                    net(x)
            return torch.equal(bn, net[1].running_mean)
        net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))
        data = [(torch.randn(6, 4), torch.randint(0, 2, (6,)))]
        same = fit(net, data, [(torch.randn(6, 4) + 3, None)])
        """, "GT550", 9, holds="not same")),
    # GT550: a trainer's method, a dropout model on `self`, a `while` evaluation loop under
    # `inference_mode`. Look-alike: `self.model.eval()` before the loop
    "evaluation-while-loop-in-trainer-method": (Shape("""
        class Runner:
            def __init__(self):
                self.model = nn.Sequential(nn.Linear(4, 16), nn.Dropout(0.5), nn.Linear(16, 1))
                self.opt = torch.optim.Adam(self.model.parameters())
            def epoch(self, xs, x_val):
                self.model.train()
                for x in xs:
                    self.opt.zero_grad()
                    self.model(x).pow(2).mean().backward()
                    self.opt.step()
                self.model.eval()
                outs, i = [], 0
                while i < 2:
                    with torch.inference_mode():
                        outs.append(self.model(x_val))
                    i += 1
                return torch.equal(outs[0], outs[1])
        same = Runner().epoch([torch.randn(3, 4)], torch.randn(5, 4))
        """, "GT550", holds="same"), Shape("""
        class Runner:
            def __init__(self):
                self.model = nn.Sequential(nn.Linear(4, 16), nn.Dropout(0.5), nn.Linear(16, 1))
                self.opt = torch.optim.Adam(self.model.parameters())
            def epoch(self, xs, x_val):
                self.model.train()
                for x in xs:
                    self.opt.zero_grad()
                    self.model(x).pow(2).mean().backward()
                    self.opt.step()
                outs, i = [], 0
                while i < 2:
                    with torch.inference_mode():
                        outs.append(self.model(x_val))
                    i += 1
                return torch.equal(outs[0], outs[1])
        same = Runner().epoch([torch.randn(3, 4)], torch.randn(5, 4))
        """, "GT550", 12, holds="not same")),
    # GT551 (diffusers DreamBooth: `unet.train()` each epoch, the text encoder loaded in eval
    # mode by `from_pretrained` and trained too): here a function of the file returns the
    # encoder evaluated, the loop is in a function. Look-alike: the evaluated encoder is
    # frozen (in no optimizer), as such loaders mean it
    "helper-loaded-encoder-trained-in-eval-mode": (Shape("""
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.3))
            def forward(self, x):
                return self.net(x)
        def load_encoder():
            enc = Encoder()
            enc.eval()
            return enc
        def train(head, data):
            enc = load_encoder()
            opt = torch.optim.SGD(head.parameters(), lr=0.1)
            for epoch in range(2):
                head.train()
                for x in data:
                    loss = head(enc(x)).pow(2).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            return enc
        enc = train(nn.Sequential(nn.Dropout(0.1), nn.Linear(8, 1)), [torch.randn(5, 4)])
        """, "GT551", holds="not enc.training"), Shape("""
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.3))
            def forward(self, x):
                return self.net(x)
        def load_encoder():
            enc = Encoder()
            enc.eval()
            return enc
        def train(head, data):
            enc = load_encoder()
            opt = torch.optim.SGD(list(head.parameters()) + list(enc.parameters()), lr=0.1)
            for epoch in range(2):
                head.train()
                for x in data:
                    loss = head(enc(x)).pow(2).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            return enc
        enc = train(nn.Sequential(nn.Dropout(0.1), nn.Linear(8, 1)), [torch.randn(5, 4)])
        """, "GT551", 15, holds="not enc.training and enc.net[0].weight.grad is not None")),
    # GT551: a script that evaluates the critic first (`critic.eval()`), then trains actor
    # and critic in one loop that puts only the actor in train mode. Look-alike: both are put
    # in train mode
    "evaluated-critic-trained-in-eval-mode": (Shape("""
        actor = nn.Sequential(nn.Linear(3, 8), nn.Dropout(0.2), nn.Linear(8, 2))
        critic = nn.Sequential(nn.Linear(3, 8), nn.BatchNorm1d(8), nn.Linear(8, 1))
        critic.eval()
        with torch.no_grad():
            baseline = critic(torch.randn(4, 3)).mean()
        opt = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=1e-3)
        for epoch in range(2):
            actor.train()
            critic.train()
            s = torch.randn(6, 3)
            loss = actor(s).pow(2).mean() + (critic(s) - baseline).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT551", holds="critic.training"), Shape("""
        actor = nn.Sequential(nn.Linear(3, 8), nn.Dropout(0.2), nn.Linear(8, 2))
        critic = nn.Sequential(nn.Linear(3, 8), nn.BatchNorm1d(8), nn.Linear(8, 1))
        critic.eval()
        with torch.no_grad():
            baseline = critic(torch.randn(4, 3)).mean()
        opt = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=1e-3)
        for epoch in range(2):
            actor.train()
            s = torch.randn(6, 3)
            loss = actor(s).pow(2).mean() + (critic(s) - baseline).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT551", 8, holds="not critic.training")),
    # GT765 (bentrevett actor-critic: `-(returns * log_prob_actions).sum()` next to
    # `smooth_l1_loss(returns, values)`): here an agent's method, `torch.mean`, a squared
    # difference as the critic's loss. Look-alike: the actor weighs by `G - v.detach()`
    "critic-fit-but-not-baseline-in-method": (
        Shape("""
        import copy
        class Agent:
            def __init__(self):
                self.pi = nn.Linear(3, 2)
                self.v = nn.Linear(3, 1)
                self.opt = torch.optim.SGD([*self.pi.parameters(), *self.v.parameters()], lr=0.1)
            def update(self, s, a, G):
                logp = torch.log_softmax(self.pi(s), -1).gather(1, a[:, None]).squeeze(1)
                v = self.v(s).squeeze(1)
                actor_loss = -torch.mean(logp * (G - v.detach()))
                critic_loss = (G - v).pow(2).mean()
                self.opt.zero_grad()
                (actor_loss + critic_loss).backward()
                g = self.pi.weight.grad.clone()
                self.opt.step()
                return g
        a1 = Agent()
        a2 = copy.deepcopy(a1)
        with torch.no_grad():
            a2.v.bias += 10
        s, a, G = torch.randn(8, 3), torch.randint(0, 2, (8,)), torch.randn(8)
        same = torch.equal(a1.update(s, a, G), a2.update(s, a, G))
        """, "GT765", holds="not same"),
        Shape("""
        import copy
        class Agent:
            def __init__(self):
                self.pi = nn.Linear(3, 2)
                self.v = nn.Linear(3, 1)
                self.opt = torch.optim.SGD([*self.pi.parameters(), *self.v.parameters()], lr=0.1)
            def update(self, s, a, G):
                logp = torch.log_softmax(self.pi(s), -1).gather(1, a[:, None]).squeeze(1)
                v = self.v(s).squeeze(1)
                actor_loss = -torch.mean(logp * G)
                critic_loss = (G - v).pow(2).mean()
                self.opt.zero_grad()
                (actor_loss + critic_loss).backward()
                g = self.pi.weight.grad.clone()
                self.opt.step()
                return g
        a1 = Agent()
        a2 = copy.deepcopy(a1)
        with torch.no_grad():
            a2.v.bias += 10
        s, a, G = torch.randn(8, 3), torch.randint(0, 2, (8,)), torch.randn(8)
        same = torch.equal(a1.update(s, a, G), a2.update(s, a, G))
        """, "GT765", 10, holds="same")),
    # GT765: a function with an `nn.MSELoss` criterion and the policy term added in the same
    # expression. Look-alike: the advantage is bound first, from the values
    "critic-fit-by-criterion-in-one-expression": (Shape("""
        def step(policy, critic, opt, s, a, targets):
            crit = nn.MSELoss()
            vals = critic(s).squeeze(1)
            adv = targets - vals.detach()
            logp = torch.distributions.Categorical(logits=policy(s)).log_prob(a)
            loss = -(adv * logp).sum() + 0.5 * crit(vals, targets)
            opt.zero_grad()
            loss.backward()
            opt.step()
        policy, critic = nn.Linear(3, 2), nn.Linear(3, 1)
        opt = torch.optim.Adam([*policy.parameters(), *critic.parameters()])
        step(policy, critic, opt, torch.randn(8, 3), torch.randint(0, 2, (8,)), torch.randn(8))
        """, "GT765", holds="policy.weight.grad is not None"), Shape("""
        def step(policy, critic, opt, s, a, targets):
            crit = nn.MSELoss()
            vals = critic(s).squeeze(1)
            logp = torch.distributions.Categorical(logits=policy(s)).log_prob(a)
            loss = -(targets * logp).sum() + 0.5 * crit(vals, targets)
            opt.zero_grad()
            loss.backward()
            opt.step()
        policy, critic = nn.Linear(3, 2), nn.Linear(3, 1)
        opt = torch.optim.Adam([*policy.parameters(), *critic.parameters()])
        step(policy, critic, opt, torch.randn(8, 3), torch.randint(0, 2, (8,)), torch.randn(8))
        """, "GT765", 5, holds="policy.weight.grad is not None")),
    # GT552 (diffusers textual inversion: the gradients of every embedding row but the new
    # token's zeroed, under AdamW with weight decay): here new output neurons trained in a
    # function, the old rows' gradients zeroed by a slice, SGD with weight_decay.
    # Look-alike: the same without weight decay
    "old-neurons-zeroed-under-sgd-decay": (Shape("""
        def grow(layer, data, old=2):
            before = layer.weight[:old].detach().clone()
            opt = torch.optim.SGD(layer.parameters(), lr=0.5)
            for x, y in data:
                opt.zero_grad()
                F.mse_loss(layer(x), y).backward()
                layer.weight.grad[:old] = 0
                opt.step()
            return torch.equal(before, layer.weight[:old])
        same = grow(nn.Linear(3, 4), [(torch.randn(5, 3), torch.randn(5, 4))] * 3)
        """, "GT552", holds="same"), Shape("""
        def grow(layer, data, old=2):
            before = layer.weight[:old].detach().clone()
            opt = torch.optim.SGD(layer.parameters(), lr=0.5, weight_decay=0.1)
            for x, y in data:
                opt.zero_grad()
                F.mse_loss(layer(x), y).backward()
                layer.weight.grad[:old] = 0
                opt.step()
            return torch.equal(before, layer.weight[:old])
        same = grow(nn.Linear(3, 4), [(torch.randn(5, 3), torch.randn(5, 4))] * 3)
        """, "GT552", 3, holds="not same")),
    # GT552: a script, the gradient bound to a name first, `.zero_()` on a slice of it, AdamW
    # with its default decay. Look-alike: the frozen rows are written back after each step
    "embedding-rows-zeroed-under-adamw-default": (Shape("""
        emb = nn.Embedding(6, 4)
        orig = emb.weight.detach().clone()
        opt = torch.optim.AdamW(emb.parameters(), lr=0.1)
        for _ in range(3):
            emb(torch.tensor([5, 1])).pow(2).sum().backward()
            g = emb.weight.grad
            g[:5].zero_()
            opt.step()
            opt.zero_grad()
            with torch.no_grad():
                emb.weight[:5] = orig[:5]
        """, "GT552", holds="torch.equal(emb.weight[:5], orig[:5])"), Shape("""
        emb = nn.Embedding(6, 4)
        orig = emb.weight.detach().clone()
        opt = torch.optim.AdamW(emb.parameters(), lr=0.1)
        for _ in range(3):
            emb(torch.tensor([5, 1])).pow(2).sum().backward()
            g = emb.weight.grad
            g[:5].zero_()
            opt.step()
            opt.zero_grad()
        """, "GT552", 3, holds="not torch.equal(emb.weight[:5], orig[:5])")),
    # GT758 (PyTorch-DANN: `Classifier.forward` returns `self.classifier(x)`, a Sequential
    # ending in `nn.Softmax`, and the criteria are built in one tuple assignment): here a
    # head kept on `self` and `ce, mse = ...`. Look-alike: the Sequential ends in its Linear
    "softmax-sequential-behind-forward": (Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
            def forward(self, x):
                return self.head(x)
        ce, mse = nn.CrossEntropyLoss(), nn.MSELoss()
        net = Net()
        x, y = torch.randn(6, 4), torch.randint(0, 3, (6,))
        out = net(x)
        loss = ce(out, y)
        loss.backward()
        """, "GT758", holds="not torch.allclose(out.sum(1), torch.ones(6))"), Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3),
                                          nn.Softmax(dim=-1))
            def forward(self, x):
                return self.head(x)
        ce, mse = nn.CrossEntropyLoss(), nn.MSELoss()
        net = Net()
        x, y = torch.randn(6, 4), torch.randint(0, 3, (6,))
        out = net(x)
        loss = ce(out, y)
        loss.backward()
        """, "GT758", 5, holds="torch.allclose(out.sum(1), torch.ones(6))")),
    # GT758: two classes deep (`Model.forward` -> `Body.forward` -> a Sequential ending in
    # `nn.Softmax(dim=1)`), `F.cross_entropy` in a training function. Look-alike: the body's
    # Sequential ends in `nn.LogSoftmax` and the loss is `F.nll_loss`
    "softmax-sequential-two-classes-deep": (Shape("""
        class Body(nn.Module):
            def __init__(self):
                super().__init__()
                self.seq = nn.Sequential(nn.Linear(5, 4), nn.LogSoftmax(dim=1))
            def forward(self, x):
                return self.seq(x)
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = Body()
            def forward(self, x):
                return self.body(x)
        def fit(model, x, y):
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            out = model(x)
            loss = F.nll_loss(out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return out
        out = fit(Model(), torch.randn(6, 5), torch.randint(0, 4, (6,)))
        """, "GT758", holds="torch.allclose(out.exp().sum(1), torch.ones(6))"), Shape("""
        class Body(nn.Module):
            def __init__(self):
                super().__init__()
                self.seq = nn.Sequential(nn.Linear(5, 4), nn.Softmax(dim=1))
            def forward(self, x):
                return self.seq(x)
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = Body()
            def forward(self, x):
                return self.body(x)
        def fit(model, x, y):
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            out = model(x)
            loss = F.cross_entropy(out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return out
        out = fit(Model(), torch.randn(6, 5), torch.randint(0, 4, (6,)))
        """, "GT758", 4, holds="torch.allclose(out.sum(1), torch.ones(6))")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
