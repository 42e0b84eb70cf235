"""Shapes that fired wrongly on the projects of docs/triage/unseen32a.md (session 32: NLP,
speech, time series and recommender research code), each in another spelling than the
project's and next to a buggy twin that is still reported. The snippets run on real torch."""
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
    # pytorch-ts (pts/modules/flows.py) and TEMPO: `modules += batch_norm * [BatchNorm(n)]`
    # with `batch_norm=True` a constructor flag: True * [x] is [x], False * [x] is []: one new
    # layer per block or none, nothing repeated. Twin: the count is an int parameter: the same
    # norm object twice
    "flag-times-a-one-layer-list": (Shape("""
        class Flow(nn.Module):
            def __init__(self, n_blocks, size, use_norm=True):
                super().__init__()
                mods = []
                for _ in range(n_blocks):
                    mods += [nn.Linear(size, size)]
                    mods += use_norm * [nn.BatchNorm1d(size)]
                self.net = nn.Sequential(*mods)
        f = Flow(3, 4)
        """, "GT446", holds="len({id(m) for m in f.net if isinstance(m, nn.BatchNorm1d)}) == 3"),
        Shape("""
        class Flow(nn.Module):
            def __init__(self, n_blocks, size, n_norms=2):
                super().__init__()
                mods = []
                for _ in range(n_blocks):
                    mods += [nn.Linear(size, size)]
                    mods += n_norms * [nn.BatchNorm1d(size)]
                self.net = nn.Sequential(*mods)
        f = Flow(3, 4)
        """, "GT446", line=7,
            holds="len({id(m) for m in f.net if isinstance(m, nn.BatchNorm1d)}) == 3")),
    # rome (experiments/causal_trace.py): `layer = nn.Linear(d, d)`, then
    # `nethook.set_requires_grad(False, layer)` (a helper of util/nethook.py looping over
    # `*models`' parameters), then `layer.bias[...] = mean`: the weights no longer require
    # grad, the write is allowed. Twin: the helper is given True: the write raises
    "layer-frozen-by-a-helper-before-its-weights-are-written": (Shape("""
        def set_requires_grad(requires_grad, *models):
            for model in models:
                if isinstance(model, nn.Module):
                    for param in model.parameters():
                        param.requires_grad = requires_grad
        def make_transform(mean):
            layer = nn.Linear(3, 3)
            set_requires_grad(False, layer)
            layer.bias[...] = mean
            return layer
        def fit(net, x):
            net(x).sum().backward()
        t = make_transform(torch.ones(3))
        """, "GT302", holds="torch.equal(t.bias, torch.ones(3))"), Shape("""
        def set_requires_grad(requires_grad, *models):
            for model in models:
                if isinstance(model, nn.Module):
                    for param in model.parameters():
                        param.requires_grad = requires_grad
        def make_transform(mean):
            layer = nn.Linear(3, 3)
            set_requires_grad(True, layer)
            layer.bias[...] = mean
            return layer
        def fit(net, x):
            net(x).sum().backward()
        t = make_transform(torch.ones(3))
        """, "GT302", line=9, raises=(RuntimeError, "leaf Variable that requires grad"))),
    # KernelGAT (kgat/models.py): `select_prob = softmax(scores, dim=1)` over the evidence,
    # `class_prob = softmax(feats, dim=2)` over the classes, `(select_prob * class_prob)
    # .sum(1)`: a mixture of per-evidence class distributions, itself a distribution. Twin:
    # the evidence weights are not normalised (a sigmoid): the class probabilities summed over
    # evidence add up to more than 1
    "mixture-of-distributions-weighted-over-the-summed-axis": (Shape("""
        def mix(scores, feats):
            select = F.softmax(scores, dim=1)
            per_class = F.softmax(feats, dim=2)
            return torch.sum(select * per_class, 1)
        p = mix(torch.randn(2, 5, 1), torch.randn(2, 5, 3))
        """, "GT764", holds="torch.allclose(p.sum(-1), torch.ones(2))"), Shape("""
        def mix(scores, feats):
            select = torch.sigmoid(scores)
            per_class = F.softmax(feats, dim=2)
            return torch.sum(select * per_class, 1)
        p = mix(torch.randn(2, 5, 1), torch.randn(2, 5, 3))
        """, "GT764", line=3, holds="not torch.allclose(p.sum(-1), torch.ones(2))")),
    # fast_abs_rl (model/summ.py): `Seq2SeqSumm` registers `self._attn_wq` and builds a
    # plain `AttentionalLSTMDecoder(self._embedding, ..., self._attn_wq, ...)` that keeps a
    # reference: the weights are the owner's, registered and trained. Twin: the plain class
    # makes its own attention weight: it is missing from `parameters()`
    "plain-helper-given-the-owners-parameters": (Shape("""
        class Decoder:
            def __init__(self, emb, attn_w):
                self._emb = emb
                self._attn_w = attn_w
            def __call__(self, tok):
                return self._emb(tok) @ self._attn_w
        class Summ(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(10, 4)
                self.attn_wq = nn.Parameter(torch.randn(4, 4))
                self.dec = Decoder(self.emb, self.attn_wq)
            def forward(self, tok):
                return self.dec(tok)
        m = Summ()
        """, "GT413", holds="any(p is m.attn_wq for p in m.parameters())"), Shape("""
        class Decoder:
            def __init__(self, emb, d):
                self._emb = emb
                self._attn_w = nn.Parameter(torch.randn(d, d))
            def __call__(self, tok):
                return self._emb(tok) @ self._attn_w
        class Summ(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(10, 4)
                self.dec = Decoder(self.emb, 4)
            def forward(self, tok):
                return self.dec(tok)
        m = Summ()
        """, "GT413", line=1,
            holds="not any(p is m.dec._attn_w for p in m.parameters())")),
    # SSSD (imputers/CSDIS4.py): `CSDI_base.evaluate` runs `self.impute` under `no_grad`; the
    # file's `evaluate(model, loader)` calls `model.eval()` and then `model.evaluate(batch)`:
    # the method runs on a model in eval mode (the receiver's type is unknown to the analysis).
    # Twin: the function calls `model.evaluate(batch)` with no `eval()`: dropout still drops
    "method-called-on-a-model-put-in-eval-mode": (Shape("""
        class ImputerBase(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
            def impute(self, x):
                out = x
                for _ in range(3):
                    out = self.net(out)
                return out
            def evaluate(self, x):
                with torch.no_grad():
                    return self.impute(x)
            def fit(self, x, opt):
                loss = self.net(x).pow(2).mean()
                loss.backward()
                opt.step()
        class Imputer(ImputerBase):
            pass
        def evaluate(model, batches):
            model.eval()
            return [model.evaluate(b) for b in batches]
        def run(x):
            return evaluate(model=Imputer(), batches=[x, x])
        a, b = run(torch.ones(2, 4))
        """, "GT540", holds="torch.equal(a, b)"), Shape("""
        class ImputerBase(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
            def impute(self, x):
                out = x
                for _ in range(3):
                    out = self.net(out)
                return out
            def evaluate(self, x):
                with torch.no_grad():
                    return self.impute(x)
            def fit(self, x, opt):
                loss = self.net(x).pow(2).mean()
                loss.backward()
                opt.step()
        class Imputer(ImputerBase):
            pass
        def evaluate(model, batches):
            return [model.evaluate(b) for b in batches]
        def run(x):
            return evaluate(model=Imputer(), batches=[x, x])
        a, b = run(torch.ones(2, 4))
        """, "GT540", line=8, holds="not torch.equal(a, b)")),
    # RAVE (rave/pqmf.py): `loss_wc` is the objective `scipy.optimize.fmin` minimises to
    # design a filter: `np.max` of `np.convolve` of `kaiser_filter(...)`, a function of the
    # file returning SciPy's `firwin`: NumPy all the way, no tensor to cut. Twin: the filter
    # is a learned tensor given to the loss: NumPy cannot read it
    "numpy-objective-of-a-scipy-filter-design": (Shape("""
        import numpy as np
        from scipy.signal import firwin
        from scipy.optimize import fmin
        def prototype(wc, n):
            h = firwin(n, wc / np.pi)
            return h
        def loss_wc(wc, m, n):
            h = prototype(wc, n)
            g = np.convolve(h, h[::-1], "full")
            g = abs(g[g.shape[-1] // 2::2 * m][1:])
            return np.max(g)
        def design(m, n):
            return fmin(lambda w: loss_wc(w, m, n), 0.25, disp=0)[0]
        wc = design(4, 33)
        """, "GT103", holds="0 < wc < 3.2"), Shape("""
        import numpy as np
        def loss_wc(h, m):
            g = np.convolve(h, h, "full")
            return torch.as_tensor(np.max(abs(g[::m])))
        h = nn.Parameter(torch.randn(9))
        loss_wc(h, 4).backward()
        """, "GT103", line=3, raises=(RuntimeError, "numpy"))),
    # VectorQuantizedCPC (train_vocoder.py): `MultiStepLR(opt, milestones=cfg.training.
    # scheduler.milestones)` stepped every batch, the epoch loop's bound `n_epochs =
    # cfg.training.n_steps // len(loader) + 1`: the milestones count steps (50000, ... of 160000
    # steps); the shared `cfg.training` prefix is not an epoch count. Twin: the milestone is half
    # the epoch count: it comes after 2 batches
    "step-milestones-from-a-config-that-also-bounds-the-epochs": (Shape("""
        from types import SimpleNamespace as NS
        def train(cfg, model, loader):
            opt = torch.optim.SGD(model.parameters(), lr=1.0)
            sched = torch.optim.lr_scheduler.MultiStepLR(
                opt, milestones=cfg.training.scheduler.milestones, gamma=0.5)
            n_epochs = cfg.training.n_steps // len(loader) + 1
            for epoch in range(1, n_epochs + 1):
                for x in loader:
                    opt.zero_grad()
                    model(x).sum().backward()
                    opt.step()
                    sched.step()
            return opt.param_groups[0]["lr"]
        cfg = NS(training=NS(n_steps=8, scheduler=NS(milestones=[6])))
        lr = train(cfg, nn.Linear(2, 1), [torch.ones(1, 2)] * 4)
        """, "GT526", holds="lr == 0.5"), Shape("""
        from types import SimpleNamespace as NS
        def train(cfg, model, loader):
            opt = torch.optim.SGD(model.parameters(), lr=1.0)
            sched = torch.optim.lr_scheduler.MultiStepLR(
                opt, milestones=[cfg.training.n_epochs // 2], gamma=0.5)
            for epoch in range(cfg.training.n_epochs):
                for x in loader:
                    opt.zero_grad()
                    model(x).sum().backward()
                    opt.step()
                    sched.step()
            return opt.param_groups[0]["lr"]
        cfg = NS(training=NS(n_epochs=4))
        lr = train(cfg, nn.Linear(2, 1), [torch.ones(1, 2)] * 4)
        """, "GT526", line=11, holds="lr == 0.5")),
    # speedyspeech (code/speedyspeech.py): `forward` runs `round_and_mask(torch.exp(d), plen)`
    # only under `if not self.training:`, and the helper writes `d[d < 1] = 1` in place: in
    # eval mode, where nothing is backpropagated. Twin: the same rounding in the training arm
    # before the loss: backward raises
    "helper-writes-an-exp-output-on-the-eval-arm": (Shape("""
        def round_up(d):
            d[d < 1] = 1
            return torch.round(d)
        class Durations(nn.Module):
            def __init__(self):
                super().__init__()
                self.pred = nn.Linear(4, 1)
            def forward(self, x):
                d = self.pred(x)[..., 0]
                if not self.training:
                    d = round_up(torch.exp(d))
                return d
        m = Durations()
        F.mse_loss(m(torch.randn(3, 4)), torch.zeros(3)).backward()
        m.eval()
        with torch.no_grad():
            out = m(torch.randn(3, 4))
        """, "GT602", holds="bool((out >= 1).all())"), Shape("""
        def round_up(d):
            d[d < 1] = 1
            return torch.round(d)
        class Durations(nn.Module):
            def __init__(self):
                super().__init__()
                self.pred = nn.Linear(4, 1)
            def forward(self, x):
                d = self.pred(x)[..., 0]
                if self.training:
                    d = round_up(torch.exp(d))
                return d
        m = Durations()
        F.mse_loss(m(torch.randn(3, 4)), torch.zeros(3)).backward()
        """, "GT602", line=2, raises=(RuntimeError, "modified by an inplace operation"))),
    # VocGAN (utils/train.py): each pass of the step loop steps the generator, then runs
    # `for _ in range(rep_discriminator)` critic steps summed into `loss_d_sum`, made anew on
    # every pass and read with `.item()` after the inner loop: it keeps the graphs of one
    # iteration's critic steps, never more. Twin: the sum is made once, before the loop over
    # iterations: it keeps every iteration's graphs
    "critic-losses-summed-within-one-iteration": (Shape("""
        def train(g, d, opt_g, opt_d, batches, reps=2):
            logged = []
            for x in batches:
                opt_g.zero_grad()
                (-d(g(x)).mean()).backward()
                opt_g.step()
                loss_d_sum = 0.0
                for _ in range(reps):
                    opt_d.zero_grad()
                    loss_d = d(g(x).detach()).mean() - d(x).mean()
                    loss_d.backward()
                    opt_d.step()
                    loss_d_sum += loss_d
                logged.append((loss_d_sum / reps).item())
            return logged
        g, d = nn.Linear(3, 3), nn.Linear(3, 1)
        out = train(g, d, torch.optim.SGD(g.parameters(), lr=0.1),
                    torch.optim.SGD(d.parameters(), lr=0.1), [torch.randn(2, 3)] * 3)
        """, "GT505", holds="len(out) == 3 and all(isinstance(v, float) for v in out)"),
        Shape("""
        def train(g, d, opt_g, opt_d, batches, reps=2):
            loss_d_sum = 0.0
            for x in batches:
                opt_g.zero_grad()
                (-d(g(x)).mean()).backward()
                opt_g.step()
                for _ in range(reps):
                    opt_d.zero_grad()
                    loss_d = d(g(x).detach()).mean() - d(x).mean()
                    loss_d.backward()
                    opt_d.step()
                    loss_d_sum += loss_d
            return loss_d_sum
        g, d = nn.Linear(3, 3), nn.Linear(3, 1)
        out = train(g, d, torch.optim.SGD(g.parameters(), lr=0.1),
                    torch.optim.SGD(d.parameters(), lr=0.1), [torch.randn(2, 3)] * 3)
        """, "GT505", line=12, holds="out.grad_fn is not None")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
