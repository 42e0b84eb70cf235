"""Session 54, helper "probes54" (docs/triage/probes54.md): the facts built for the probes of
`benchmarks/probes/probes54/`, each with a buggy twin in another style (reported on the line
marked ``# <- GTnnn``) and a silent look-alike (no finding of that code), in-process."""
from __future__ import annotations

import re
import textwrap

import pytest

from gradtrace.lint import check_source

MARK = re.compile(r"#\s*<-\s*(GT\d{3})")

# (code, buggy twin, silent look-alike); every twin and look-alike runs on torch 2.13 CPU
CASES: dict[str, tuple[str, str, str]] = {
    # a module-level alias of an optimizer class: calling it builds that optimizer
    "optimizer-class-alias": ("GT404", """
        import torch
        import torch.nn as nn
        Optim = torch.optim.SGD
        net = nn.Linear(3, 1)
        opt = Optim(net.parameters(), lr=0.1)
        net = nn.Linear(3, 1)  # <- GT404
        for _ in range(2):
            loss = net(torch.randn(4, 3)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, """
        import torch
        import torch.nn as nn
        from functools import partial
        make_opt = partial(torch.optim.AdamW, lr=1e-3, weight_decay=0.01)
        net = nn.Linear(3, 1)
        opt = make_opt(net.parameters())
        for _ in range(2):
            loss = net(torch.randn(4, 3)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """),
    # torch.arange of Python ints (sizes) is int64: it cannot require grad
    "arange-of-sizes-requires-grad": ("GT304", """
        import torch
        def positions(tokens):
            idx = torch.arange(len(tokens))
            idx.requires_grad_()  # <- GT304
            return idx
        positions(torch.randn(5, 8))
        """, """
        import torch
        import torch.nn as nn
        class Ramp(nn.Module):
            def __init__(self, start, stop, step):
                super().__init__()
                self.ramp = nn.Parameter(torch.arange(start, stop, step))
                self.pos = nn.Parameter(torch.arange(8, dtype=torch.float32))
        Ramp(0.0, 1.0, 0.25)
        """),
    # a parameter-group's "params" generator, exhausted before the optimizer sees it
    "group-generator-consumed": ("GT405", """
        import torch
        import torch.nn as nn
        model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
        enc = model[0].parameters()
        n_enc = len(list(enc))  # <- GT405
        opt = torch.optim.SGD((dict(params=enc, lr=1e-3), dict(params=model[1].parameters())),
                              lr=0.1)
        """, """
        import torch
        import torch.nn as nn
        model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
        enc = list(model[0].parameters())
        n_enc = len(list(enc))
        opt = torch.optim.SGD((dict(params=enc, lr=1e-3), dict(params=model[1].parameters())),
                              lr=0.1)
        """),
    # an in-place fill keeps a new tensor a new leaf: still a plain attribute, not a Parameter
    "filled-leaf-as-attribute": ("GT402", """
        import torch
        import torch.nn as nn
        class VQ(nn.Module):
            def __init__(self, k=8, d=4):
                super().__init__()
                self.codebook = torch.empty(k, d).uniform_(-1, 1).requires_grad_(True)  # <- GT402
            def forward(self, z):
                return torch.cdist(z, self.codebook).argmin(-1), z @ self.codebook.t()
        VQ()(torch.randn(3, 4))
        """, """
        import torch
        import torch.nn as nn
        class VQ(nn.Module):
            def __init__(self, k=8, d=4):
                super().__init__()
                self.codebook = nn.Parameter(torch.empty(k, d).uniform_(-1, 1))
                self.register_buffer("usage", torch.empty(k).fill_(0.0))
            def forward(self, z):
                return z @ self.codebook.t()
        VQ()(torch.randn(3, 4))
        """),
    # `requires_grad_` is tensor API too: a parameter loop variable is not a module
    "parameter-flag-not-module": ("GT407", """
        import torch
        from encoders import build_encoder
        enc = build_encoder("small")
        print(sum(p.numel() for p in enc.parameters()))
        enc.requires_grad = False  # <- GT407
        """, """
        import torch
        import torch.nn as nn
        model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
        for name, p in model.named_parameters():
            if name.startswith("0."):
                p.requires_grad_(False)
        model.train()
        for p in model.parameters():
            p.requires_grad = True
            p.requires_grad_(True)
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        """),
    # a freeze made by a helper of the file, undone by a later unfreeze-all before training
    "helper-freeze-undone": ("GT432", """
        import torch
        import torch.nn as nn
        def freeze(module):
            module.requires_grad_(False)
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone = nn.Linear(4, 4)
                self.head = nn.Linear(4, 2)
            def forward(self, x):
                return self.head(self.backbone(x))
        net = Net()
        freeze(net.backbone)
        net.to("cpu").train()
        net.requires_grad_(True)  # <- GT432
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        """, """
        import torch
        import torch.nn as nn
        def freeze(module, frozen):
            if frozen:
                module.requires_grad_(False)
        def warmup_freeze(module):
            module.requires_grad_(False)
        net = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        freeze(net[0], True)
        net.requires_grad_(True)
        warmup_freeze(net[0])
        net(torch.randn(2, 4)).sum().backward()
        opt.step()
        net.requires_grad_(True)
        """),
    # an optimizer over a layer built in its own argument, next to the layer that trains
    "optimizer-over-unkept-module": ("GT483", """
        import torch
        import torch.nn as nn
        def build(dim):
            head = nn.Linear(dim, 2)
            opt = torch.optim.Adam(  # the head's optimizer
                [{"params": nn.Linear(dim, 2).parameters(), "lr": 1e-3}])  # <- GT483
            return head, opt
        head, opt = build(8)
        """, """
        import torch
        import torch.nn as nn
        def build(dim):
            head = nn.Linear(dim, 2)
            opt = torch.optim.Adam([{"params": head.parameters(), "lr": 1e-3}])
            return head, opt
        def lr_curve(steps):
            opt = torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=0.1)
            sched = torch.optim.lr_scheduler.StepLR(opt, 2)
            out = []
            for _ in range(steps):
                out.append(sched.get_last_lr()[0])
                opt.step()
                sched.step()
            return out
        build(8)
        lr_curve(4)
        """),
    # a registry dict of optimizer classes builds an optimizer whichever key is picked
    "optimizer-registry": ("GT404", """
        import torch
        import torch.nn as nn
        OPTIMS = {"sgd": torch.optim.SGD, "adamw": torch.optim.AdamW}
        cfg = {"optim": "adamw", "lr": 1e-3}
        model = nn.Linear(4, 1)
        opt = OPTIMS[cfg["optim"]](model.parameters(), lr=cfg["lr"])
        model = nn.Linear(4, 1)  # <- GT404
        for _ in range(2):
            loss = model(torch.randn(3, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, """
        import torch
        import torch.nn as nn
        OPTIMS = {"sgd": torch.optim.SGD, "adamw": torch.optim.AdamW}
        cfg = {"optim": "adamw", "lr": 1e-3}
        model = nn.Linear(4, 1)
        model = nn.Linear(4, 1)
        opt = OPTIMS[cfg["optim"]](model.parameters(), lr=cfg["lr"])
        for _ in range(2):
            loss = model(torch.randn(3, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """),
    # a number set in the class body, read as self.<attr>: no graph reaches the loss through it
    "class-body-number": ("GT108", """
        import torch
        import torch.nn as nn
        class HingeTerms:
            scale = 2
            def __call__(self, logits, y):
                wrong = (logits.argmax(-1) != y).float()  # <- GT108
                return wrong.mean() * self.scale
        net = nn.Linear(5, 3)
        crit = HingeTerms()
        loss = crit(net(torch.randn(4, 5)), torch.randint(0, 3, (4,)))
        loss.backward()
        """, """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        class HingeTerms:
            scale = 2
            def __call__(self, logits, y):
                wrong = (logits.argmax(-1) != y).float()
                return F.cross_entropy(logits, y) * self.scale + 0.0 * wrong.mean()
        net = nn.Linear(5, 3)
        crit = HingeTerms()
        loss = crit(net(torch.randn(4, 5)), torch.randint(0, 3, (4,)))
        loss.backward()
        """),
    # an LBFGS closure made and returned by a function of the file
    "lbfgs-closure-factory": ("GT721", """
        import torch
        import torch.nn as nn
        def make_closure(model, x, y):
            def closure():
                loss = (model(x) - y).pow(2).mean()
                loss.backward()  # <- GT721
                return loss
            return closure
        model = nn.Linear(3, 1)
        opt = torch.optim.LBFGS(model.parameters(), max_iter=10)
        opt.step(make_closure(model, torch.randn(8, 3), torch.randn(8, 1)))
        """, """
        import torch
        import torch.nn as nn
        def make_closure(model, opt, x, y):
            def closure():
                opt.zero_grad()
                loss = (model(x) - y).pow(2).mean()
                loss.backward()
                return loss
            return closure
        model = nn.Linear(3, 1)
        opt = torch.optim.LBFGS(model.parameters(), max_iter=10)
        opt.step(make_closure(model, opt, torch.randn(8, 3), torch.randn(8, 1)))
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
