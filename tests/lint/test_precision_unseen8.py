"""Shapes that fired wrongly on the projects of docs/triage/unseen.md, session 8 (cleanrl,
dinov2, PyTorch Geometric's examples, SlowFast), each in another spelling than the project's
and next to a buggy twin that is still reported. Every snippet runs on real torch."""
from __future__ import annotations

import sys
import types

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = """
import torch
import torch.nn as nn
import torch.nn.functional as F
from gae_lib import AdversarialAE
torch.manual_seed(0)
"""
SECOND_TIME = (RuntimeError, "Trying to backward through the graph a second time")
ELEMENT0 = (RuntimeError, "does not require grad")

# a model class from another file (as `torch_geometric.nn.ARGVA` is to PyG's example): its
# discriminator loss scores `z.detach()`, its regulariser runs through `z`
GAE_LIB = """
import torch
import torch.nn as nn
class AdversarialAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder, self.discriminator = nn.Linear(4, 3), nn.Linear(3, 1)
    def encode(self, x):
        return self.encoder(x)
    def discriminator_loss(self, z):
        real = torch.sigmoid(self.discriminator(torch.randn_like(z)))
        fake = torch.sigmoid(self.discriminator(z.detach()))
        return -(torch.log(real + 1e-9) + torch.log(1 - fake + 1e-9)).mean()
    def reg_loss(self, z):
        return -torch.log(torch.sigmoid(self.discriminator(z)) + 1e-9).mean()
"""

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # DQN puts the prediction second (`mse_loss(td_target, old_val)`); the Q-network was moved
    # with `.to(device)` (nn.Module.to returns the module) or built by a factory
    "td-target-first-model-moved": (Shape("""
        class QNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)
            def forward(self, x):
                return self.fc(x)
        qf, target_qf = QNet().to("cpu"), QNet().to("cpu")
        opt = torch.optim.SGD(qf.parameters(), 0.1)
        for step in range(2):
            obs, nxt, rew = torch.randn(5, 4), torch.randn(5, 4), torch.randn(5)
            with torch.no_grad():
                y = rew + 0.9 * target_qf(nxt).max(1)[0]
            q = qf(obs).max(1)[0]
            loss = F.smooth_l1_loss(y, q)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT201", holds="qf.fc.weight.grad is not None"), Shape("""
        class QNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)
            def forward(self, x):
                return self.fc(x)
        qf, target_qf = QNet().to("cpu"), QNet().to("cpu")
        opt = torch.optim.SGD(qf.parameters(), 0.1)
        for step in range(2):
            obs, nxt, rew = torch.randn(5, 4), torch.randn(5, 4), torch.randn(5)
            with torch.no_grad():
                y = rew + 0.9 * target_qf(nxt).max(1)[0]
                q = qf(obs).max(1)[0]
            loss = F.smooth_l1_loss(y, q)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT201", 11, ELEMENT0)),
    "td-target-first-model-from-a-factory": (Shape("""
        def make_critic():
            return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        critic = make_critic()
        critic_target = make_critic()
        def update(batch, opt):
            with torch.no_grad():
                target = batch["r"] + 0.99 * critic_target(batch["s2"]).squeeze(1)
            value = critic(batch["s"]).squeeze(1)
            loss = F.mse_loss(target, value)
            opt.zero_grad()
            loss.backward()
            opt.step()
        update({"s": torch.randn(3, 4), "s2": torch.randn(3, 4), "r": torch.randn(3)},
               torch.optim.SGD(critic.parameters(), 0.1))
        """, "GT201", holds="critic[0].weight.grad is not None"), Shape("""
        def make_critic():
            return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        critic = make_critic()
        critic_target = make_critic()
        def update(batch, opt):
            with torch.no_grad():
                target = batch["r"] + 0.99 * critic_target(batch["s2"]).squeeze(1)
                value = critic(batch["s"]).squeeze(1)
            loss = F.mse_loss(target, value)
            opt.zero_grad()
            loss.backward()
            opt.step()
        update({"s": torch.randn(3, 4), "s2": torch.randn(3, 4), "r": torch.randn(3)},
               torch.optim.SGD(critic.parameters(), 0.1))
        """, "GT201", 6, ELEMENT0)),
    # a module that freezes all it has built so far, then adds new trainable parts (ViT-Adapter)
    "adapter-added-after-freezing-self": (Shape("""
        class Adapted(nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone = nn.Linear(4, 4)
                self.requires_grad_(False)
                self.prompt = nn.Parameter(torch.zeros(4))
        m = Adapted()
        """, "GT409", holds="not m.backbone.weight.requires_grad and m.prompt.requires_grad"),
        Shape("""
        class Adapted(nn.Module):
            def __init__(self, vectors):
                super().__init__()
                self.embed = nn.Embedding(10, 4)
                self.requires_grad_(False)
                self.embed.weight = nn.Parameter(vectors)
        m = Adapted(torch.randn(10, 4))
        """, "GT409", 6, holds="m.embed.weight.requires_grad")),
    # running totals added under no_grad record no graph
    "total-added-under-no-grad": (Shape("""
        model = nn.Linear(4, 2)
        opt = torch.optim.SGD(model.parameters(), 0.1)
        stats = torch.zeros(2)
        for x in [torch.randn(3, 4) for _ in range(3)]:
            out = model(x)
            loss = out.pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            with torch.no_grad():
                stats[0] += loss * out.size(0)
                stats[1] += out.size(0)
        """, "GT505", holds="not stats.requires_grad"), Shape("""
        model = nn.Linear(4, 2)
        opt = torch.optim.SGD(model.parameters(), 0.1)
        stats = torch.zeros(2)
        for x in [torch.randn(3, 4) for _ in range(3)]:
            out = model(x)
            loss = out.pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            stats[0] += loss * out.size(0)
            stats[1] += out.size(0)
        """, "GT505", 10, holds="stats.requires_grad")),
    # a model of the file built from an acronym-named class (`GAT(...)` is a construction,
    # not a run); a timing decorator of the file makes the step return (loss, seconds)
    "acronym-model-timed-step": (Shape("""
        import time
        class MLP(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)
            def forward(self, x):
                return self.fc(x)
        def timed(fn):
            def wrapper(*args):
                t0 = time.perf_counter()
                return fn(*args), time.perf_counter() - t0
            return wrapper
        @timed
        def train_step(model, opt, x):
            opt.zero_grad()
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            return float(loss)
        def run(loader):
            model = MLP().to("cpu")
            opt = torch.optim.SGD(model.parameters(), 0.1)
            seconds = []
            for batch in loader:
                loss, secs = train_step(model, opt, batch)
                seconds.append(secs)
            return seconds
        s = run([torch.randn(3, 4)] * 2)
        """, "GT505", holds="isinstance(s[0], float)"), Shape("""
        class MLP(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)
            def forward(self, x):
                return self.fc(x)
        def run(loader):
            model = MLP().to("cpu")
            outputs = []
            for batch in loader:
                out = model(batch)
                outputs.append(out)
            return outputs
        s = run([torch.randn(3, 4)] * 2)
        """, "GT505", 12, holds="s[0].requires_grad")),
    # a model of the file returning a ratio of sizes next to its outputs (TopK pooling)
    "forward-returns-a-size-ratio": (Shape("""
        class Pool(nn.Module):
            def __init__(self):
                super().__init__()
                self.score = nn.Linear(4, 1)
            def forward(self, x):
                keep = self.score(x).squeeze(1) > 0
                kept = x[keep] * self.score(x)[keep]
                frac = kept.size(0) / x.size(0)
                return kept.sum(0), frac
        pool = Pool()
        def evaluate(loader):
            total = 0
            for x in loader:
                out, frac = pool(x)
                total += frac
            return total
        r = evaluate([torch.randn(6, 4) for _ in range(2)])
        """, "GT505", holds="isinstance(r, float)"), Shape("""
        class Pool(nn.Module):
            def __init__(self):
                super().__init__()
                self.score = nn.Linear(4, 1)
            def forward(self, x):
                keep = self.score(x).squeeze(1) > 0
                kept = x[keep] * self.score(x)[keep]
                frac = kept.size(0) / x.size(0)
                return kept.sum(0), frac
        pool = Pool()
        def evaluate(loader):
            total = 0
            for x in loader:
                out, frac = pool(x)
                total += out
            return total
        r = evaluate([torch.randn(6, 4) for _ in range(2)])
        """, "GT505", 15, holds="r.requires_grad")),
    # the softmax module is moved to the input's device (`.to`, `.cuda`): that runs no model,
    # and the logits are a function argument (prototype scores)
    "softmax-module-moved-over-an-argument": (Shape("""
        def swav_loss(scores, codes, temp=0.1):
            sm = nn.Softmax(dim=1).to(scores.device)
            p = sm(scores / temp)
            return -(codes * torch.log(p)).sum(1).mean()
        proto = nn.Linear(4, 3)
        z = F.normalize(torch.randn(5, 4), dim=1)
        swav_loss(F.normalize(proto(z), dim=1), torch.full((5, 3), 1 / 3)).backward()
        """, "GT755", holds="torch.isfinite(proto.weight.grad).all()"), Shape("""
        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 3)
            def loss(self, x, codes):
                sm = nn.Softmax(dim=1).to(x.device)
                p = sm(self.fc(x))
                return -(codes * torch.log(p)).sum(1).mean()
        head = Head()
        with torch.no_grad():
            head.fc.weight.mul_(1000.0)
        head.loss(torch.randn(5, 4), torch.full((5, 3), 1 / 3)).backward()
        """, "GT755", 8, holds="torch.isnan(head.fc.weight.grad).any()")),
    # another file's model computes the discriminator loss from `z.detach()` (PyG's ARGVA):
    # repeating that backward in a loop frees nothing of `z`'s graph
    "library-discriminator-loss-on-shared-z": (Shape("""
        model = AdversarialAE()
        enc_opt = torch.optim.SGD(model.encoder.parameters(), 0.1)
        disc_opt = torch.optim.SGD(model.discriminator.parameters(), 0.1)
        z = model.encode(torch.randn(6, 4))
        for _ in range(3):
            disc_opt.zero_grad()
            d_loss = model.discriminator_loss(z)
            d_loss.backward()
            disc_opt.step()
        loss = model.reg_loss(z)
        loss.backward()
        enc_opt.step()
        """, "GT507", holds="model.encoder.weight.grad is not None"), Shape("""
        model = AdversarialAE()
        enc_opt = torch.optim.SGD(model.encoder.parameters(), 0.1)
        disc_opt = torch.optim.SGD(model.discriminator.parameters(), 0.1)
        z = model.encode(torch.randn(6, 4))
        for _ in range(3):
            disc_opt.zero_grad()
            d_loss = F.binary_cross_entropy_with_logits(model.discriminator(z), torch.ones(6, 1))
            d_loss.backward()
            disc_opt.step()
        """, "GT507", 4, SECOND_TIME)),
}


@pytest.fixture(autouse=True)
def _gae_lib(monkeypatch: pytest.MonkeyPatch) -> None:
    lib = types.ModuleType("gae_lib")
    exec(compile(GAE_LIB, "gae_lib.py", "exec"), lib.__dict__)
    monkeypatch.setitem(sys.modules, "gae_lib", lib)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
