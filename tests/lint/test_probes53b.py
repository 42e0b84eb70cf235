"""Session 53, helper "probes53b" (docs/triage/probes53b.md): mission bugs written in new styles
(trainer classes, notebooks, helpers, decorators). Each case: a buggy twin (the code reported on
the line marked ``# <- GTnnn``) and a silent look-alike (no finding of that code), in-process."""
from __future__ import annotations

import re
import textwrap

import pytest

from gradtrace.lint import check_paths, check_source

MARK = re.compile(r"#\s*<-\s*(GT\d{3})")

# (code, buggy twin, silent look-alike)
CASES: dict[str, tuple[str, str, str]] = {
    # a freeze written as a comparison: the statement's value is thrown away
    "discarded-flag-comparison": ("GT489", """
        import torch
        from torch import nn
        def build(n_frozen):
            net = nn.Sequential(*[nn.Linear(4, 4) for _ in range(3)])
            for i, layer in enumerate(net):
                if i < n_frozen:
                    for name, param in layer.named_parameters():
                        param.requires_grad is False  # <- GT489
            return net
        opt = torch.optim.SGD(filter(lambda p: p.requires_grad, build(2).parameters()), lr=0.1)
        """, """
        import torch
        from torch import nn
        def build(n_frozen):
            net = nn.Sequential(*[nn.Linear(4, 4) for _ in range(3)])
            for i, layer in enumerate(net):
                if i < n_frozen:
                    for name, param in layer.named_parameters():
                        param.requires_grad = False
                        assert param.requires_grad == False
            still = [p for p in net.parameters() if p.requires_grad == True]
            return net, still
        """),
    # a temperature made non-leaf by `.to()` kept on `self`, its `.grad` read in another method
    "self-attribute-made-non-leaf": ("GT305", """
        import torch
        class Scaler:
            def __init__(self, device):
                self.log_t = torch.zeros(1, requires_grad=True).cuda(device)  # <- GT305
            def update(self, loss, lr=0.01):
                loss.backward()
                with torch.no_grad():
                    self.log_t -= lr * self.log_t.grad
        """, """
        import torch
        class Scaler:
            def __init__(self, device):
                self.log_t = torch.zeros(1, device=device, requires_grad=True)
                self.shifted = torch.zeros(1, requires_grad=True).cuda(device)
            def update(self, loss, lr=0.01):
                loss.backward()
                with torch.no_grad():
                    self.log_t -= lr * self.log_t.grad
                return self.shifted * 2
        """),
    # a `@torch.no_grad()` method that runs only the layer it cuts, called from forward
    "no-grad-decorated-encoder-method": ("GT115", """
        import torch
        import torch.nn as nn
        class TextClassifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(100, 16)
                self.out = nn.Linear(16, 2)
            @torch.no_grad()  # <- GT115
            def encode(self, tokens):
                return self.embed(tokens).mean(1)
            def forward(self, tokens):
                return self.out(self.encode(tokens))
        model = TextClassifier()
        opt = torch.optim.Adam(model.parameters())
        """, """
        import torch
        import torch.nn as nn
        class TextClassifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(100, 16)
                self.out = nn.Linear(16, 2)
            def encode(self, tokens):
                return self.embed(tokens).mean(1)
            def forward(self, tokens):
                return self.out(self.encode(tokens))
            @torch.no_grad()
            def predict(self, tokens):
                return self.forward(tokens).argmax(-1)
        model = TextClassifier()
        opt = torch.optim.Adam(model.parameters())
        """),
    # the generator's loss helper detaches the generator's output: its step finds no gradient
    "generator-loss-helper-detaches": ("GT580", """
        import torch
        import torch.nn.functional as F
        def generator_loss(netG, netD, noise):
            fake = netG(noise).detach()  # <- GT580
            return F.softplus(-netD(fake)).mean()
        def train(netG, netD, batches):
            opt_g = torch.optim.Adam(netG.parameters(), 2e-4)
            for noise in batches:
                opt_g.zero_grad()
                loss = generator_loss(netG, netD, noise)
                loss.backward()
                opt_g.step()
        """, """
        import torch
        import torch.nn.functional as F
        def discriminator_loss(netG, netD, noise, real):
            fake = netG(noise).detach()
            return F.softplus(netD(fake)).mean() + F.softplus(-netD(real)).mean()
        def generator_loss(netG, netD, noise):
            fake = netG(noise)
            return F.softplus(-netD(fake)).mean()
        def train(netG, netD, batches):
            opt_g = torch.optim.Adam(netG.parameters(), 2e-4)
            opt_d = torch.optim.Adam(netD.parameters(), 2e-4)
            for noise, real in batches:
                opt_d.zero_grad()
                discriminator_loss(netG, netD, noise, real).backward()
                opt_d.step()
                opt_g.zero_grad()
                generator_loss(netG, netD, noise).backward()
                opt_g.step()
        """),
    # a trainer's feature hook stores the output and returns it detached: the output replaced
    "forward-hook-returns-detached": ("GT571", """
        import torch
        import torch.nn as nn
        class FeatureTrainer:
            def __init__(self, model):
                self.model, self.cache = model, {}
                model.encoder.register_forward_hook(self._grab)
                self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
            def _grab(self, module, inp, out):
                self.cache["enc"] = out
                return out.detach().clone()  # <- GT571
            def step(self, x, y):
                loss = nn.functional.mse_loss(self.model(x), y)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
        """, """
        import torch
        import torch.nn as nn
        class FeatureTrainer:
            def __init__(self, model):
                self.model, self.cache = model, {}
                model.encoder.register_forward_hook(self._grab)
                model.encoder.register_forward_pre_hook(lambda m, i: None)
                self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
            def _grab(self, module, inp, out):
                self.cache["enc"] = out.detach().clone()
                if isinstance(out, tuple):
                    return out[0]
            def step(self, x, y):
                loss = nn.functional.mse_loss(self.model(x), y)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
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
    assert [(code, w) for w in want if (code, w) in got] == [(code, w) for w in want], got
    assert code not in {c for c, _ in _codes(textwrap.dedent(good).lstrip("\n"))}


# multi-file projects: {file: text}; the buggy twin marks its line, the look-alike is silent
PROJECTS: dict[str, tuple[str, dict[str, str], dict[str, str]]] = {
    # the optimizer is built by a helper module and stepped by another; the script rebuilds
    # the network after building it
    "optimizer-of-other-file-stale": ("GT404", {
        "optim_utils.py": """
            import torch
            def build_optimizer(net, lr=1e-3):
                opt = torch.optim.Adam(net.parameters(), lr=lr)
                return opt
            """,
        "engine.py": """
            def fit(net, opt, batches):
                for x, y in batches:
                    opt.zero_grad()
                    ((net(x) - y) ** 2).mean().backward()
                    opt.step()
            """,
        "main.py": """
            import torch
            import optim_utils
            from engine import fit
            net = torch.nn.Linear(4, 1)
            opt = optim_utils.build_optimizer(net)
            net = torch.nn.Linear(4, 1)  # <- GT404
            fit(net, opt, [(torch.randn(2, 4), torch.randn(2, 1))])
            """}, {
        "optim_utils.py": """
            import torch
            def build_optimizer(net, lr=1e-3):
                opt = torch.optim.Adam(net.parameters(), lr=lr)
                return opt
            """,
        "engine.py": """
            def fit(net, opt, batches):
                for x, y in batches:
                    opt.zero_grad()
                    ((net(x) - y) ** 2).mean().backward()
                    opt.step()
            """,
        "main.py": """
            import torch
            import optim_utils
            from engine import fit
            net = torch.nn.Linear(4, 1)
            opt = optim_utils.build_optimizer(net)
            net = torch.nn.Linear(4, 1)
            opt = optim_utils.build_optimizer(net)
            fit(net, opt, [(torch.randn(2, 4), torch.randn(2, 1))])
            """}),
    # a helper of the model file "freezes" a submodule by attribute; the script calls it
    "submodule-flag-by-callers": ("GT407", {
        "nets.py": """
            import torch
            import torch.nn as nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.encoder = nn.GRU(4, 8)
                    self.temperature = nn.Parameter(torch.ones(1))
                    self.head = nn.Linear(8, 2)
            def freeze_encoder(net, flag=False):
                net.encoder.requires_grad = flag  # <- GT407
            """,
        "run.py": """
            import torch
            import nets as M
            net = M.Net().to("cpu")
            M.freeze_encoder(net)
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            """}, {
        "nets.py": """
            import torch
            import torch.nn as nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.encoder = nn.GRU(4, 8)
                    self.temperature = nn.Parameter(torch.ones(1))
                    self.head = nn.Linear(8, 2)
            def freeze_encoder(net, flag=False):
                net.encoder.requires_grad_(flag)
                net.temperature.requires_grad = flag
            """,
        "run.py": """
            import torch
            import nets as M
            net = M.Net().to("cpu")
            M.freeze_encoder(net)
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            """}),
    # a validation helper of the engine leaves grad off; the runner validates, then fits
    "grad-left-off-by-helper-of-other-file": ("GT203", {
        "engine.py": """
            import torch
            def validate(net, batches):
                torch.set_grad_enabled(False)  # <- GT203
                return sum(float((net(x) - y).abs().mean()) for x, y in batches)
            def fit(net, opt, batches):
                for x, y in batches:
                    opt.zero_grad()
                    ((net(x) - y) ** 2).mean().backward()
                    opt.step()
            """,
        "runner.py": """
            import torch
            import engine
            def main():
                net = torch.nn.Linear(3, 1)
                opt = torch.optim.SGD(net.parameters(), lr=0.1)
                data = [(torch.randn(2, 3), torch.randn(2, 1))]
                for epoch in range(3):
                    engine.fit(net, opt, data)
                    print(engine.validate(net, data))
            main()
            """}, {
        "engine.py": """
            import torch
            def validate(net, batches):
                torch.set_grad_enabled(False)
                return sum(float((net(x) - y).abs().mean()) for x, y in batches)
            def fit(net, opt, batches):
                torch.set_grad_enabled(True)
                for x, y in batches:
                    opt.zero_grad()
                    ((net(x) - y) ** 2).mean().backward()
                    opt.step()
            """,
        "runner.py": """
            import torch
            import engine
            def main():
                net = torch.nn.Linear(3, 1)
                opt = torch.optim.SGD(net.parameters(), lr=0.1)
                data = [(torch.randn(2, 3), torch.randn(2, 1))]
                for epoch in range(3):
                    engine.fit(net, opt, data)
                    print(engine.validate(net, data))
            main()
            """}),
    # the training step's file imports no torch: only its helpers' file does (the prefilter)
    "step-file-without-torch": ("GT105", {
        "losses.py": """
            import torch
            def charbonnier(pred, target, eps=1e-3):
                diff = pred.data - target
                return torch.sqrt(diff * diff + eps * eps).mean()
            """,
        "engine.py": """
            from losses import charbonnier
            def train_step(net, opt, batch):
                lr_img, hr_img = batch
                loss = charbonnier(net(lr_img), hr_img)  # <- GT105
                opt.zero_grad()
                loss.backward()
                opt.step()
            """}, {
        "losses.py": """
            import torch
            def charbonnier(pred, target, eps=1e-3):
                diff = pred - target
                return torch.sqrt(diff * diff + eps * eps).mean()
            """,
        "engine.py": """
            from losses import charbonnier
            def train_step(net, opt, batch):
                lr_img, hr_img = batch
                loss = charbonnier(net(lr_img), hr_img)
                opt.zero_grad()
                loss.backward()
                opt.step()
            """}),
}


def _write(root, files: dict[str, str]) -> dict[str, list[int]]:
    marks = {}
    for name, text in files.items():
        text = textwrap.dedent(text).lstrip("\n")
        (root / name).write_text(text)
        marks[name] = [i for i, line in enumerate(text.splitlines(), 1) if MARK.search(line)]
    return marks


@pytest.mark.parametrize("case", sorted(PROJECTS))
def test_project(case: str, tmp_path) -> None:
    code, bad, good = PROJECTS[case]
    (tmp_path / "bad").mkdir()
    (tmp_path / "good").mkdir()
    marks = _write(tmp_path / "bad", bad)
    got = {(f.path.rsplit("/", 1)[-1], f.line) for f in
           check_paths([str(tmp_path / "bad")]).findings if f.code == code}
    want = {(name, line) for name, lines in marks.items() for line in lines}
    assert want and want <= got, got
    _write(tmp_path / "good", good)
    assert not [f for f in check_paths([str(tmp_path / "good")]).findings if f.code == code]
