"""Session 56, helper "probes56" (docs/triage/probes56.md): the facts built for the probes of
`benchmarks/probes/probes56/`, each with a buggy twin in another style (reported on the line
marked ``# <- GTnnn``) and silent look-alikes (no finding of that code), in-process."""
from __future__ import annotations

import re
import textwrap

import pytest

from gradtrace.lint import check_paths, check_source
from gradtrace.lint.config import Settings

MARK = re.compile(r"#\s*<-\s*(GT\d{3})")

# (code, buggy twin, silent look-alikes); every source runs on torch 2.13 CPU
CASES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    # NOTE [weight norm replaces]: new Parameters, the optimizer keeps the dropped weight
    "weight-norm-after-optimizer": ("GT404", """
        import torch
        import torch.nn as nn
        from torch.nn.utils import weight_norm
        disc = nn.Sequential(nn.Conv1d(1, 4, 3), nn.LeakyReLU(0.2), nn.Conv1d(4, 1, 3))
        opt_d = torch.optim.Adam(disc.parameters(), lr=1e-3)
        for m in disc.modules():
            if isinstance(m, nn.Conv1d):
                weight_norm(m)  # <- GT404
        for _ in range(2):
            loss = disc(torch.randn(2, 1, 16)).mean()
            opt_d.zero_grad()
            loss.backward()
            opt_d.step()
        """, ("""
        import torch
        import torch.nn as nn
        from torch.nn.utils.parametrizations import spectral_norm
        disc = nn.Sequential(nn.Conv1d(1, 4, 3), nn.LeakyReLU(0.2), nn.Conv1d(4, 1, 3))
        opt_d = torch.optim.Adam(disc.parameters(), lr=1e-3)
        for m in disc.modules():
            if isinstance(m, nn.Conv1d):
                spectral_norm(m)
        for _ in range(2):
            loss = disc(torch.randn(2, 1, 16)).mean()
            opt_d.zero_grad()
            loss.backward()
            opt_d.step()
        """, """
        import torch
        import torch.nn as nn
        from torch.nn.utils.parametrizations import weight_norm
        head = nn.Linear(4, 2)
        weight_norm(head)
        opt = torch.optim.SGD(head.parameters(), lr=0.1)
        head(torch.randn(3, 4)).sum().backward()
        opt.step()
        """)),
    # NOTE [yielded values]: a loop over a generator of the file reads what it yields
    "generator-yields-numbers": ("GT102", """
        import torch
        import torch.nn as nn
        class Fitter:
            def __init__(self):
                self.net = nn.Linear(3, 1)
                self.crit = nn.MSELoss()
                self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
            def losses(self, data):
                for x, y in data:
                    yield float(self.crit(self.net(x), y))  # <- GT102
            def epoch(self, data):
                total = [v for v in self.losses(data)]
                loss = torch.tensor(total, requires_grad=True).sum()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
        Fitter().epoch([(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)])
        """, ("""
        import torch
        import torch.nn as nn
        def micro_losses(model, batches, criterion):
            for x, y in batches:
                yield criterion(model(x), y)
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        window = []
        for l in micro_losses(model, [(torch.randn(5, 4), torch.randn(5, 1))] * 4, nn.MSELoss()):
            window.append(l)
        loss = torch.stack(window).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        """,)),
    # NOTE [guarded division in a loss]
    "where-guarded-division-in-loss": ("GT751", """
        import torch
        import torch.nn as nn
        def cosine_loss(a, b):
            dot = (a * b).sum(1)
            norms = a.pow(2).sum(1) * b.pow(2).sum(1)
            cos = torch.where(norms > 0, dot / norms, torch.zeros_like(dot))  # <- GT751
            return (1 - cos).mean()
        enc = nn.Linear(3, 3)
        with torch.no_grad():
            enc.weight.zero_()
            enc.bias.zero_()
        loss = cosine_loss(enc(torch.randn(2, 3)), torch.randn(2, 3))
        loss.backward()
        """, ("""
        import torch
        import torch.nn as nn
        def cosine_loss(a, b, eps=1e-8):
            dot = (a * b).sum(1)
            norms = a.pow(2).sum(1) * b.pow(2).sum(1) + eps
            cos = torch.where(norms > 0, dot / norms, torch.zeros_like(dot))
            return (1 - cos).mean()
        enc = nn.Linear(3, 3)
        loss = cosine_loss(enc(torch.randn(2, 3)), torch.randn(2, 3))
        loss.backward()
        """, """
        import torch
        import torch.nn as nn
        def iou(pred, gt):
            inter = torch.min(pred, gt).sum(1)
            union = pred.sum(1) + gt.sum(1) - inter
            return torch.where(union > 0, inter / union, torch.zeros_like(union)).mean()
        net = nn.Linear(4, 4)
        x, gt = torch.randn(3, 4), torch.rand(3, 4)
        loss = (net(x) - gt).pow(2).mean()
        loss.backward()
        print(iou(net(x).detach().relu(), gt).item())
        """)),
    # NOTE [returned closure], same file: the closure a factory hands back trains
    "closure-trains-after-grad-off": ("GT203", """
        import torch
        import torch.nn as nn
        def make_step(model, opt):
            def step(x, y):
                loss = nn.functional.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            return step
        def validate(model, x):
            torch.set_grad_enabled(False)  # <- GT203
            return model(x).mean().item()
        net = nn.Linear(3, 1)
        train_step = make_step(net, torch.optim.SGD(net.parameters(), lr=0.1))
        print(validate(net, torch.randn(2, 3)))
        try:
            train_step(torch.randn(4, 3), torch.randn(4, 1))
        except RuntimeError:
            pass
        """, ("""
        import torch
        import torch.nn as nn
        def make_predictor(model):
            def predict(x):
                return model(x).argmax(-1)
            return predict
        def validate(model, x):
            torch.set_grad_enabled(False)
            return model(x).mean().item()
        net = nn.Linear(3, 2)
        predict = make_predictor(net)
        print(validate(net, torch.randn(2, 3)))
        print(predict(torch.randn(4, 3)))
        """,)),
}


def _codes(src: str) -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in check_source(src, "probe.py")]


@pytest.mark.parametrize("case", sorted(CASES))
def test_probe(case: str) -> None:
    code, bad, goods = CASES[case]
    bad = textwrap.dedent(bad).lstrip("\n")
    want = [i for i, line in enumerate(bad.splitlines(), 1) if MARK.search(line)]
    got = _codes(bad)
    assert want and [(code, w) for w in want if (code, w) in got] == [(code, w) for w in want], got
    for good in goods:
        assert code not in {c for c, _ in _codes(textwrap.dedent(good).lstrip("\n"))}


ENGINE = '''
import torch


def create_trainer(model, optimizer, loss_fn):
    def update(batch):
        x, y = batch
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
    return update


def create_evaluator(model):
    model.eval()
    torch.set_grad_enabled(False)
    return lambda x: model(x).argmax(1)


def create_predictor(model):
    def predict(x):
        return model(x).argmax(1)
    return predict
'''

TRAIN = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
from engine56 import create_trainer, create_evaluator, create_predictor

model = nn.Linear(6, 3)
step = {factory}
evaluate = create_evaluator(model)
for _ in range(2):
    step((torch.randn(4, 6), torch.randint(0, 3, (4,))))
'''


@pytest.mark.parametrize("factory, want", [
    ("create_trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), F.cross_entropy)", [16]),
    ("create_predictor(model)", []),
])
def test_closure_of_another_file_trains_after_grad_off(tmp_imports, factory, want):
    """NOTE [returned closure] across files: `step` is the `update` that `create_trainer`
    (engine56.py) hands back; it runs `backward()` after `create_evaluator` left grad off
    (torch 2.13: `element 0 of tensors does not require grad`). A predictor's closure runs
    no backward: silent."""
    (tmp_imports / "engine56.py").write_text(ENGINE.lstrip("\n"))
    (tmp_imports / "train56.py").write_text(TRAIN.lstrip("\n").format(factory=factory))
    found = [f for f in check_paths([str(tmp_imports)], Settings()).findings
             if f.code == "GT203"]
    assert [f.line for f in found] == want
    assert all(f.path.endswith("engine56.py") for f in found)
