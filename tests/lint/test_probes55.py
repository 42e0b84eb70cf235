"""Session 55, helper "probes55" (docs/triage/probes55.md): the facts built for the probes of
`benchmarks/probes/probes55/`, each with a buggy twin in another style (reported on the line
marked ``# <- GTnnn``) and a silent look-alike (no finding of that code), in-process."""
from __future__ import annotations

import re
import textwrap

import pytest

from gradtrace.lint import check_source

MARK = re.compile(r"#\s*<-\s*(GT\d{3})")

# (code, buggy twin, silent look-alike); every twin and look-alike runs on torch 2.13 CPU
CASES: dict[str, tuple[str, str, str]] = {
    # a copy made under no_grad is a constant anyway (a TD target): NOTE [copied under no_grad]
    "copy-under-no-grad": ("GT104", """
        import torch
        import torch.nn as nn
        class MultiHead(nn.Module):
            def __init__(self):
                super().__init__()
                self.heads = nn.ModuleList(nn.Linear(3, 1) for _ in range(2))
            def fit_batch(self, x, y, opt):
                per_head = [nn.functional.mse_loss(h(x), y) for h in self.heads]
                loss = torch.tensor(per_head).sum()  # <- GT104
                opt.zero_grad()
                loss.backward()
        m = MultiHead()
        try:
            m.fit_batch(torch.randn(4, 3), torch.randn(4, 1), torch.optim.SGD(m.parameters(), 0.1))
        except RuntimeError:
            pass
        """, """
        import random
        import torch
        import torch.nn as nn
        q_net = nn.Linear(4, 2)
        opt = torch.optim.SGD(q_net.parameters(), lr=0.1)
        memory = [(torch.randn(4), random.randrange(2), random.random(), torch.randn(4), q_net(torch.randn(4)))
                  for _ in range(8)]
        batch = random.sample(memory, 4)
        q_sa = q_net(torch.stack([b[0] for b in batch])).gather(1, torch.tensor([[b[1]] for b in batch])).squeeze(1)
        with torch.no_grad():
            target = torch.tensor([b[2] for b in batch]) + 0.9 * q_net(torch.stack([b[3] for b in batch])).max(1).values
        loss = nn.functional.mse_loss(q_sa, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        """),
    # torch.as_tensor of the number a helper returns: a new leaf (NOTE [number handed back])
    "as-tensor-of-helper-number": ("GT104", """
        import torch
        import torch.nn as nn
        class Trainer:
            def __init__(self, model):
                self.model = model
                self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
            def score(self, out, y):
                return float(nn.functional.l1_loss(out, y))
            def step(self, x, y):
                loss = torch.as_tensor(self.score(self.model(x), y), dtype=torch.float32).requires_grad_()  # <- GT104
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
        Trainer(nn.Linear(3, 1)).step(torch.randn(4, 3), torch.randn(4, 1))
        """, """
        import torch
        import torch.nn as nn
        def l1(out, y):
            return (out - y).abs().mean()
        def count(out):
            return out.numel().__float__()
        model = nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = torch.randn(4, 3), torch.randn(4, 1)
        loss = torch.as_tensor(l1(model(x), y)) * torch.as_tensor(count(x)) / 12
        opt.zero_grad()
        loss.backward()
        opt.step()
        """),
    # model.apply(init) after the optimizer, init replacing its argument's parameters
    "apply-initialiser-replaces": ("GT404", """
        import torch
        import torch.nn as nn
        def reset_bias(m):
            if isinstance(m, nn.Linear) and m.bias is not None:
                m.bias = nn.Parameter(torch.zeros(m.out_features))
        def train(model, data):
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            model.apply(reset_bias)  # <- GT404
            for x, y in data:
                loss = nn.functional.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
        train(nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 1)), [(torch.randn(2, 3), torch.randn(2, 1))])
        """, """
        import torch
        import torch.nn as nn
        def init_weights(m):
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)
        def train(model, data):
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            model.apply(init_weights)
            for x, y in data:
                loss = nn.functional.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
        train(nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 1)), [(torch.randn(2, 3), torch.randn(2, 1))])
        """),
    # a train() override switching every parameter's flag on undoes a freeze of the class
    "train-override-unfreezes": ("GT493", """
        import torch.nn as nn
        class Probe(nn.Module):
            def __init__(self, freeze_encoder=True):
                super().__init__()
                self.encoder = nn.Sequential(nn.Linear(6, 6), nn.ReLU())
                self.head = nn.Linear(6, 2)
                if freeze_encoder:
                    for p in self.encoder.parameters():
                        p.requires_grad = False
            def train(self, mode: bool = True):
                nn.Module.train(self, mode)
                self.requires_grad_(mode)  # <- GT493
                return self
        Probe().train()
        """, """
        import torch.nn as nn
        class Probe(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Sequential(nn.Linear(6, 6), nn.BatchNorm1d(6))
                self.head = nn.Linear(6, 2)
                for p in self.encoder.parameters():
                    p.requires_grad = False
            def train(self, mode: bool = True):
                super().train(mode)
                for p in self.head.parameters():
                    p.requires_grad = mode
                self.encoder.eval()
                return self
        Probe().train()
        """),
    # the model built again by the call __init__ built it with (NOTE [built alike]), the
    # optimizer made by any call handed `params=` (NOTE [params keyword])
    "setup-builds-model-again": ("GT404", """
        import torch
        import torch.nn as nn
        def create(spec, **extra):
            return spec["cls"](**spec["kw"], **extra)
        SPEC = {"net": {"cls": nn.Linear, "kw": {"in_features": 3, "out_features": 1}},
                "opt": {"cls": torch.optim.SGD, "kw": {"lr": 0.1}}}
        class Run:
            def __init__(self, spec):
                self.spec = spec
                self.net = create(spec["net"])
                self.opt = create(spec["opt"], params=self.net.parameters())
            def on_fit_start(self):
                self.net = create(self.spec["net"])  # <- GT404
        run = Run(SPEC)
        run.on_fit_start()
        loss = run.net(torch.randn(4, 3)).pow(2).mean()
        run.opt.zero_grad()
        loss.backward()
        run.opt.step()
        """, """
        import torch
        import torch.nn as nn
        def create(spec, **extra):
            return spec["cls"](**spec["kw"], **extra)
        SPEC = {"net": {"cls": nn.Linear, "kw": {"in_features": 3, "out_features": 1}},
                "opt": {"cls": torch.optim.SGD, "kw": {"lr": 0.1}}}
        class Run:
            def __init__(self, spec):
                self.spec = spec
                self.net = create(spec["net"])
                self.opt = create(spec["opt"], params=self.net.parameters())
            def on_fit_start(self):
                self.net = create(self.spec["net"])
                self.opt = create(self.spec["opt"], params=self.net.parameters())
            def compile(self):
                self.net = torch.compile(self.net, backend="eager")
        run = Run(SPEC)
        run.on_fit_start()
        run.compile()
        loss = run.net(torch.randn(4, 3)).pow(2).mean()
        run.opt.zero_grad()
        loss.backward()
        run.opt.step()
        """),
    # a buffer made before the loop keeps graph values each backward reads again
    "graph-kept-in-buffer": ("GT577", """
        import torch
        import torch.nn as nn
        from collections import deque
        encoder = nn.Sequential(nn.Linear(3, 5), nn.Tanh())
        opt = torch.optim.Adam(encoder.parameters(), lr=1e-3)
        window = deque(maxlen=3)
        try:
            for step in range(4):
                z = encoder(torch.randn(1, 3))
                window.append(z)  # <- GT577
                smooth = torch.stack(list(window)).mean(0)
                opt.zero_grad()
                smooth.pow(2).sum().backward()
                opt.step()
        except RuntimeError:
            pass
        """, """
        import torch
        import torch.nn as nn
        from torch.distributions import Categorical
        policy = nn.Linear(4, 2)
        opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
        log_probs, rewards = [], []
        for episode in range(3):
            for t in range(5):
                dist = Categorical(logits=policy(torch.randn(4)))
                a = dist.sample()
                log_probs.append(dist.log_prob(a))
                rewards.append(float(a))
            loss = -(torch.stack(log_probs) * torch.tensor(rewards)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            del log_probs[:]
            rewards.clear()
        """),
    # a dict entry (through `.clone()`/`.detach()`) of an integer tensor asked to require grad
    "integer-entry-requires-grad": ("GT304", """
        import torch
        def embed_attack(model):
            feats = {"tokens": torch.randint(0, 50, (2, 4)), "mask": torch.ones(2, 4)}
            try:
                feats["tokens"].detach().requires_grad_()  # <- GT304
            except RuntimeError:
                pass
            return feats
        embed_attack(None)
        """, """
        import torch
        def saliency(model, batch):
            x = batch["pixels"].clone().requires_grad_(True)
            model(x).sum().backward()
            return x.grad.abs()
        batch = {"pixels": torch.rand(2, 3), "label": torch.randint(0, 2, (2,))}
        saliency(torch.nn.Linear(3, 1), batch)
        """),
    # a part of the model computes features once under no_grad; the loop trains the rest
    "features-once-under-no-grad": ("GT231", """
        import torch
        import torch.nn as nn
        def finetune(model, images, labels, epochs=3):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            model.eval()
            with torch.no_grad():  # <- GT231
                cached = model.backbone(images).flatten(1)
            model.train()
            for _ in range(epochs):
                logits = model.classifier(cached)
                loss = nn.functional.cross_entropy(logits, labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        net = nn.Module()
        net.backbone = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU())
        net.classifier = nn.Linear(8, 3)
        finetune(net, torch.randn(4, 1, 4, 4), torch.randint(0, 3, (4,)))
        """, """
        import torch
        import torch.nn as nn
        def finetune(model, images, labels, epochs=3):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            with torch.no_grad():
                before = model.backbone(images).flatten(1)
            for _ in range(epochs):
                logits = model.classifier(model.backbone(images).flatten(1))
                loss = nn.functional.cross_entropy(logits, labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            return before
        net = nn.Module()
        net.backbone = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU())
        net.classifier = nn.Linear(8, 3)
        finetune(net, torch.randn(4, 1, 4, 4), torch.randint(0, 3, (4,)))
        """),
}


def _codes(src: str) -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in check_source(src, "probe.py")]


@pytest.mark.parametrize("case", sorted(CASES))
def test_probe(case: str) -> None:
    code, bad, good = CASES[case]
    bad = textwrap.dedent(bad).lstrip("\n")
    want = [i for i, line in enumerate(bad.splitlines(), 1) if MARK.search(line)]
    got = _codes(bad)
    assert want and [(code, w) for w in want if (code, w) in got] == [(code, w) for w in want], got
    assert code not in {c for c, _ in _codes(textwrap.dedent(good).lstrip("\n"))}
