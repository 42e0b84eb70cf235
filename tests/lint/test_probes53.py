"""Session 53, helper "probes53" (docs/triage/probes53.md): the mission's everyday bugs in
styles the checker missed. Each case: a buggy twin (the code reported on the line marked
``# <- GTnnn``) and a silent look-alike (no finding of that code), checked in-process."""
from __future__ import annotations

import re
import textwrap

import pytest

from gradtrace.lint import check_source

MARK = re.compile(r"#\s*<-\s*(GT\d{3})")

# (code, buggy twin, silent look-alike)
CASES: dict[str, tuple[str, str, str]] = {
    # a float64 array (`.astype(np.float64)`) made a leaf, then `.float()`: a copy, a non-leaf
    "astype-float64-then-float": ("GT305", """
        import numpy as np
        import torch
        data = np.linspace(0, 1, 12).reshape(3, 4).astype(float)
        x = torch.tensor(data, requires_grad=True).float()  # <- GT305
        (x * 2).sum().backward()
        print(x.grad)
        """, """
        import numpy as np
        import torch
        data = np.linspace(0, 1, 12).reshape(3, 4).astype(np.float32)
        x = torch.tensor(data, requires_grad=True).float()
        (x * 2).sum().backward()
        print(x.grad)
        """),
    # a helper of the file makes a new Parameter on its argument after the optimizer was built
    "helper-replaces-parameter-of-argument": ("GT404", """
        import torch
        from torch import nn
        def tie(decoder, encoder):
            decoder.weight = nn.Parameter(encoder.weight.t().clone())  # <- GT404
        model = nn.ModuleDict({"enc": nn.Linear(4, 3), "dec": nn.Linear(3, 4)})
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        tie(model["dec"], model["enc"])
        tie(model.dec, model.enc)
        for x in [torch.randn(2, 4)] * 3:
            optimizer.zero_grad()
            model.dec(model.enc(x)).pow(2).mean().backward()
            optimizer.step()
        """, """
        import torch
        from torch import nn
        def tie(decoder, encoder):
            decoder.weight = nn.Parameter(encoder.weight.t().clone())
        model = nn.ModuleDict({"enc": nn.Linear(4, 3), "dec": nn.Linear(3, 4)})
        tie(model.dec, model.enc)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x in [torch.randn(2, 4)] * 3:
            optimizer.zero_grad()
            model.dec(model.enc(x)).pow(2).mean().backward()
            optimizer.step()
        """),
    # a list of the parameter objects taken before a submodule is replaced, given later
    "parameter-list-taken-before-replacement": ("GT404", """
        import torch
        from torch import nn
        net = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
        net.add_module("head", nn.Linear(8, 4))
        trainable = [p for p in net.parameters()]
        net.head = nn.Linear(8, 2)  # <- GT404
        sgd = torch.optim.SGD(trainable, lr=0.1, momentum=0.9)
        for _ in range(3):
            sgd.zero_grad()
            net(torch.randn(5, 8)).sum().backward()
            sgd.step()
        """, """
        import torch
        from torch import nn
        net = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
        net.add_module("head", nn.Linear(8, 4))
        trainable = net.parameters()
        net.head = nn.Linear(8, 2)
        sgd = torch.optim.SGD(trainable, lr=0.1, momentum=0.9)
        for _ in range(3):
            sgd.zero_grad()
            net(torch.randn(5, 8)).sum().backward()
            sgd.step()
        """),
    # a no-grad block in `forward` that runs nothing but trainable submodules: the block leads
    "forward-block-only-trainable": ("GT115", """
        import torch
        from torch import nn
        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.GRU(6, 8, batch_first=True)
                self.proj = nn.Linear(8, 8)
                self.out = nn.Linear(8, 5)
            def forward(self, x):
                with torch.inference_mode(False), torch.no_grad():  # <- GT115
                    h = self.proj(self.enc(x)[0])
                return self.out(torch.tanh(h))
        model = Tagger()
        opt = torch.optim.AdamW(model.parameters())
        model(torch.randn(2, 3, 6)).sum().backward()
        opt.step()
        """, """
        import torch
        from torch import nn
        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.GRU(6, 8, batch_first=True)
                self.enc.requires_grad_(False)
                self.proj = nn.Linear(8, 8)
                self.out = nn.Linear(8, 5)
            def forward(self, x):
                with torch.no_grad():
                    h = self.enc(x)[0]
                    h = self.proj(h)  # <- GT115
                return self.out(torch.tanh(h))
        model = Tagger()
        opt = torch.optim.AdamW(model.parameters())
        model(torch.randn(2, 3, 6)).sum().backward()
        opt.step()
        """),
    # the training pass indented into the validation's no-grad block (`.train()` inside it)
    "training-pass-inside-validation-block": ("GT207", """
        import torch
        from torch import nn
        def fit(net, opt, train_dl, val_dl, epochs):
            for ep in range(epochs):
                net.eval()
                with torch.inference_mode():  # <- GT207
                    acc = sum((net(x).argmax(1) == y).float().mean().item() for x, y in val_dl)
                    net.train(True)
                    for x, y in train_dl:
                        opt.zero_grad()
                        nn.functional.cross_entropy(net(x), y).backward()
                        opt.step()
                print(ep, acc)
        """, """
        import torch
        from torch import nn
        def fit(net, opt, train_dl, val_dl, epochs):
            for ep in range(epochs):
                net.eval()
                with torch.inference_mode():
                    for x, y in val_dl:
                        loss = nn.functional.cross_entropy(net(x), y)
                        loss.backward()  # <- GT207
                net.train(True)
        """),
    # a part unfrozen by its own name, held by the model the optimizer was built over
    "unfrozen-part-held-by-the-model": ("GT410", """
        import copy
        import torch
        from torch import nn
        class Net(nn.Module):
            def __init__(self, encoder, n):
                super().__init__()
                self.encoder = encoder
                self.cls = nn.Linear(8, n)
            def forward(self, x):
                return self.cls(self.encoder(x))
        enc = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
        enc.requires_grad_(False)
        net = Net(enc, 3)
        opt = torch.optim.Adam([p for p in net.parameters() if p.requires_grad])
        for epoch in range(3):
            if epoch == 1:
                enc.requires_grad_(True)  # <- GT410
            opt.zero_grad()
            net(torch.randn(2, 4)).sum().backward()
            opt.step()
        """, """
        import copy
        import torch
        from torch import nn
        class Net(nn.Module):
            def __init__(self, encoder, n):
                super().__init__()
                self.encoder = encoder
                self.cls = nn.Linear(8, n)
            def forward(self, x):
                return self.cls(self.encoder(x))
        enc = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
        enc.requires_grad_(False)
        net = Net(copy.deepcopy(enc), 3)
        opt = torch.optim.Adam([p for p in net.parameters() if p.requires_grad])
        for epoch in range(3):
            if epoch == 1:
                enc.requires_grad_(True)
            opt.zero_grad()
            net(torch.randn(2, 4)).sum().backward()
            opt.step()
        """),
    # the only clearing is a submodule's `zero_grad()`: the rest of the model accumulates
    "zero-grad-of-a-part-only": ("GT501", """
        import torch
        from torch import nn
        class Seq2Seq(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.GRU(4, 8, batch_first=True)
                self.decoder = nn.Linear(8, 4)
            def forward(self, src):
                return self.decoder(self.encoder(src)[0])
        model = Seq2Seq()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        def train_epoch(batches):
            for src in batches:
                model.decoder.zero_grad(set_to_none=True)  # <- GT501
                out = model(src)
                (out - src).pow(2).mean().backward()
                optimizer.step()
        train_epoch([torch.randn(2, 3, 4)] * 3)
        """, """
        import torch
        from torch import nn
        class Seq2Seq(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.GRU(4, 8, batch_first=True)
                self.decoder = nn.Linear(8, 4)
            def forward(self, src):
                return self.decoder(self.encoder(src)[0])
        model = Seq2Seq()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        decoder_opt = torch.optim.Adam(model.decoder.parameters(), lr=1e-3)
        def train_epoch(batches):
            for src in batches:
                model.decoder.zero_grad(set_to_none=True)
                out = model(src)
                (out - src).pow(2).mean().backward()
                decoder_opt.step()
        train_epoch([torch.randn(2, 3, 4)] * 3)
        """),
    # the input is made to require grad after the forward that used it: its `.grad` stays None
    "requires-grad-after-forward": ("GT156", """
        import torch
        import torch.nn.functional as F
        net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 3))
        maps = []
        for img, label in [(torch.rand(2, 3, 2, 2), torch.tensor([0, 2]))]:
            logits = net(img)
            img.requires_grad_()  # <- GT156
            F.nll_loss(logits.log_softmax(1), label).backward()
            maps.append(img.grad.abs().amax(1))
        """, """
        import torch
        import torch.nn.functional as F
        net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 3))
        maps = []
        for img, label in [(torch.rand(2, 3, 2, 2), torch.tensor([0, 2]))]:
            logits = net(img)
            img.requires_grad_()
            logits = net(img)
            F.nll_loss(logits.log_softmax(1), label).backward()
            maps.append(img.grad.abs().amax(1))
        """),
    # an element of a list of leaves replaced by a new tensor computed from it
    "list-element-rebound-by-update": ("GT301", """
        import torch
        ws = [torch.randn(3, 3, requires_grad=True), torch.randn(3, requires_grad=True)]
        x = torch.randn(5, 3)
        for step in range(3):
            loss = (x @ ws[0] + ws[1]).pow(2).mean()
            loss.backward()
            for i in range(len(ws)):
                ws[i] = ws[i] - 0.1 * ws[i].grad  # <- GT301
        """, """
        import torch
        ws = [torch.randn(3, 3, requires_grad=True), torch.randn(3, requires_grad=True)]
        x = torch.randn(5, 3)
        for step in range(3):
            loss = (x @ ws[0] + ws[1]).pow(2).mean()
            loss.backward()
            for i, w in enumerate(ws):
                ws[i] = (w - 0.1 * w.grad).detach().requires_grad_()
        """),
    # a `parameters()` generator as one element of the list given to an optimizer
    "generator-listed-for-optimizer": ("GT488", """
        import torch
        from torch import nn
        enc, dec = nn.Linear(4, 2), nn.Linear(2, 4)
        gen = dec.parameters()
        opt = torch.optim.SGD((enc.parameters(), gen), lr=0.1)  # <- GT488
        """, """
        import torch
        from torch import nn
        enc, dec = nn.Linear(4, 2), nn.Linear(2, 4)
        gen = dec.parameters()
        opt = torch.optim.SGD([{"params": enc.parameters()}, {"params": gen}], lr=0.1)
        """),
    # a loss class's `__call__` sums Python numbers weighted by numbers its constructor got
    "item-terms-in-a-loss-class-call": ("GT102", """
        import torch
        import torch.nn.functional as F
        class Weighted:
            def __init__(self, alphas=(1.0, 2.0)):
                self.alphas = alphas
            def __call__(self, preds, ys):
                total = 0.0
                for a, p, y in zip(self.alphas, preds, ys):
                    total += a * F.l1_loss(p, y).item()  # <- GT102
                return total
        crit = Weighted((0.5, -1.0))
        heads = torch.nn.ModuleList([torch.nn.Linear(3, 1), torch.nn.Linear(3, 1)])
        opt = torch.optim.SGD(heads.parameters(), lr=0.1)
        x, ys = torch.randn(4, 3), [torch.randn(4, 1), torch.randn(4, 1)]
        for _ in range(2):
            opt.zero_grad()
            loss = crit([h(x) for h in heads], ys)
            loss.backward()
            opt.step()
        """, """
        import torch
        import torch.nn.functional as F
        class Weighted:
            def __init__(self, alphas=(1.0, 2.0)):
                self.alphas = alphas
            def __call__(self, preds, ys):
                total = 0.0
                for a, p, y in zip(self.alphas, preds, ys):
                    total += a * F.l1_loss(p, y).item()
                return total
        crit = Weighted([torch.tensor(0.5, requires_grad=True), torch.tensor(1.0, requires_grad=True)])
        heads = torch.nn.ModuleList([torch.nn.Linear(3, 1), torch.nn.Linear(3, 1)])
        opt = torch.optim.SGD(heads.parameters(), lr=0.1)
        x, ys = torch.randn(4, 3), [torch.randn(4, 1), torch.randn(4, 1)]
        for _ in range(2):
            opt.zero_grad()
            loss = crit([h(x) for h in heads], ys)
            loss.backward()
            opt.step()
        """),
    # a step function that never runs the model it steps, handed that model's detached output
    "step-function-handed-detached-output": ("GT580", """
        import torch
        from torch import nn
        G, D = nn.Linear(3, 3), nn.Linear(3, 1)
        g_opt = torch.optim.SGD(G.parameters(), lr=0.01)
        def train_generator(samples):
            g_opt.zero_grad()
            (-D(samples).mean()).backward()
            g_opt.step()
        for z in [torch.randn(4, 3)] * 2:
            samples = G(z).detach()  # <- GT580
            train_generator(samples)
        """, """
        import torch
        from torch import nn
        G, D = nn.Linear(3, 3), nn.Linear(3, 1)
        g_opt = torch.optim.SGD(G.parameters(), lr=0.01)
        def train_generator(samples):
            g_opt.zero_grad()
            (-D(samples).mean()).backward()
            g_opt.step()
        for z in [torch.randn(4, 3)] * 2:
            samples = G(z)
            train_generator(samples)
        """),
}


def _codes(src: str) -> set[tuple[str, int]]:
    return {(f.code, f.line) for f in check_source(src)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_probe_shapes(name: str) -> None:
    code, bad, good = CASES[name]
    bad, good = textwrap.dedent(bad).lstrip("\n"), textwrap.dedent(good).lstrip("\n")
    for src, buggy in ((bad, True), (good, False)):
        # the marked lines carry `code`, and no other line does (a look-alike with no mark:
        # silent; with one: the same code on another line, the one that leads there)
        want = {(m.group(1), i) for i, line in enumerate(src.splitlines(), 1)
                for m in MARK.finditer(line)}
        got = _codes(src)
        assert not buggy or want, name
        assert want <= got and {f for f in got if f[0] == code} <= want, (buggy, want, got)
