"""The callee facts of docs/triage/recall36.md (session 36): what a call of an object runs
(NOTE [inherited methods]), a method made of its arguments (NOTE [pure methods]) and the kind of
an element unpacked from a call (NOTE [unpacked element kinds]). Each pair is a correct shape
the checker must leave alone and a buggy twin it must report, written in another project's
spelling than the real-world case; every snippet runs on real torch."""
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

NO_GRAD_FN = (RuntimeError, "does not require grad")

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # a metric object used as a loss: the base class's `__call__` detaches both inputs and
    # hands them to `self.compute`, which only the subclass defines (a template method).
    # Look-alike: the base detaches the reference only, the prediction keeps its graph
    "inherited-call-of-a-metric-object": (Shape("""
        class Meter:
            def __call__(self, pred, ref):
                return self.compute(pred, ref.detach())
        class PeakSignal(Meter):
            def compute(self, a, b):
                mse = ((a - b) ** 2).mean()
                return 10 * torch.log10(1.0 / (mse + 1e-8))
        net = nn.Linear(4, 4)
        psnr = PeakSignal()
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        x, y = torch.randn(8, 4), torch.randn(8, 4)
        loss = -psnr(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        """, "GT107", holds="net.weight.grad is not None"), Shape("""
        class Meter:
            def __call__(self, pred, ref):
                return self.compute(pred.detach(), ref.detach())
        class PeakSignal(Meter):
            def compute(self, a, b):
                mse = ((a - b) ** 2).mean()
                return 10 * torch.log10(1.0 / (mse + 1e-8))
        net = nn.Linear(4, 4)
        psnr = PeakSignal()
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        x, y = torch.randn(8, 4), torch.randn(8, 4)
        loss = -psnr(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        """, "GT107", line=3, raises=NO_GRAD_FN)),
    # a plain scorer built and called in one expression inside a loss module's forward.
    # Look-alike: only the second view is a stop-gradient target (SimSiam style)
    "object-constructed-and-called-at-once": (Shape("""
        class Agreement:
            def __init__(self, dim=1):
                self.dim = dim
            def __call__(self, p, z):
                z = z.detach()
                return (F.normalize(p, dim=1) * F.normalize(z, dim=1)).sum(1)
        class SiameseLoss(nn.Module):
            def forward(self, p, z):
                return (1 - Agreement(dim=1)(p, z)).mean()
        enc = nn.Sequential(nn.Linear(6, 6), nn.Tanh())
        crit = SiameseLoss()
        opt = torch.optim.Adam(enc.parameters(), lr=1e-3)
        a, b = torch.randn(5, 6), torch.randn(5, 6)
        loss = crit(enc(a), enc(b))
        opt.zero_grad()
        loss.backward()
        opt.step()
        """, "GT107", holds="enc[0].weight.grad is not None"), Shape("""
        class Agreement:
            def __init__(self, dim=1):
                self.dim = dim
            def __call__(self, p, z):
                p, z = p.detach(), z.detach()
                return (F.normalize(p, dim=1) * F.normalize(z, dim=1)).sum(1)
        class SiameseLoss(nn.Module):
            def forward(self, p, z):
                return (1 - Agreement(dim=1)(p, z)).mean()
        enc = nn.Sequential(nn.Linear(6, 6), nn.Tanh())
        crit = SiameseLoss()
        opt = torch.optim.Adam(enc.parameters(), lr=1e-3)
        a, b = torch.randn(5, 6), torch.randn(5, 6)
        loss = crit(enc(a), enc(b))
        opt.zero_grad()
        loss.backward()
        opt.step()
        """, "GT107", line=5, raises=NO_GRAD_FN)),
    # a module whose `forward` is inherited from a base class of the file that runs it under
    # no_grad. Look-alike: the subclass overrides `forward` (the base's is never run)
    "forward-inherited-from-a-grad-off-base": (Shape("""
        class FrozenStage(nn.Module):
            def forward(self, x):
                with torch.no_grad():
                    return self.body(x)
        class TunedStem(FrozenStage):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 4)
            def forward(self, x):
                return self.body(x)
        stem = TunedStem()
        opt = torch.optim.SGD(stem.parameters(), lr=0.1)
        loss = stem(torch.randn(8, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        """, "GT202", holds="stem.body.weight.grad is not None"), Shape("""
        class FrozenStage(nn.Module):
            def forward(self, x):
                with torch.no_grad():
                    return self.body(x)
        class TunedStem(FrozenStage):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 4)
        stem = TunedStem()
        opt = torch.optim.SGD(stem.parameters(), lr=0.1)
        loss = stem(torch.randn(8, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        """, "GT202", line=3, raises=NO_GRAD_FN)),
    # a step helper returning (accuracy as a float, loss): unpacked in its order it is fine,
    # unpacked the other way round `.backward()` is called on the float
    "number-element-unpacked-from-a-helper": (Shape("""
        def score_batch(head, feats, labels):
            logits = head(feats)
            acc = (logits.argmax(1) == labels).float().mean().item()
            return acc, F.cross_entropy(logits, labels)
        head = nn.Linear(6, 3)
        opt = torch.optim.SGD(head.parameters(), lr=0.1)
        for _ in range(2):
            acc, ce = score_batch(head, torch.randn(9, 6), torch.randint(0, 3, (9,)))
            opt.zero_grad()
            ce.backward()
            opt.step()
        """, "GT101", holds="isinstance(acc, float)"), Shape("""
        def score_batch(head, feats, labels):
            logits = head(feats)
            acc = (logits.argmax(1) == labels).float().mean().item()
            return acc, F.cross_entropy(logits, labels)
        head = nn.Linear(6, 3)
        opt = torch.optim.SGD(head.parameters(), lr=0.1)
        for _ in range(2):
            ce, acc = score_batch(head, torch.randn(9, 6), torch.randint(0, 3, (9,)))
            opt.zero_grad()
            ce.backward()
            opt.step()
        """, "GT101", line=8, raises=(AttributeError, "has no attribute 'backward'"))),
    # a trainer method that hands back the loss's value for logging, bound to the name that
    # is then differentiated. Look-alike: the method hands back the tensor
    "number-returned-by-a-method": (Shape("""
        class Fitter:
            def __init__(self):
                self.net = nn.Linear(3, 1)
                self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
            def objective(self, x, y):
                return F.mse_loss(self.net(x), y)
            def fit(self, x, y):
                err = self.objective(x, y)
                self.opt.zero_grad()
                err.backward()
                self.opt.step()
                return err.item()
        last = Fitter().fit(torch.randn(7, 3), torch.randn(7, 1))
        """, "GT101", holds="isinstance(last, float)"), Shape("""
        class Fitter:
            def __init__(self):
                self.net = nn.Linear(3, 1)
                self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
            def objective(self, x, y):
                return F.mse_loss(self.net(x), y).item()
            def fit(self, x, y):
                err = self.objective(x, y)
                self.opt.zero_grad()
                err.backward()
                self.opt.step()
                return err
        last = Fitter().fit(torch.randn(7, 3), torch.randn(7, 1))
        """, "GT101", line=8, raises=(AttributeError, "has no attribute 'backward'"))),
    # precision gate (poutyne's `_compute_loss_and_metrics`): the helper turns the loss into a
    # float only when the caller does not ask for the tensor; the training caller asks for it.
    # Twin: the conversion runs on every path
    "number-on-one-path-only": (Shape("""
        class Runner:
            def __init__(self):
                self.net = nn.Linear(3, 1)
                self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
            def _loss(self, x, y, keep_tensor=False):
                loss = F.mse_loss(self.net(x), y)
                if not keep_tensor:
                    loss = float(loss.detach())
                return loss, x.shape[0]
            def step(self, x, y):
                loss, n = self._loss(x, y, keep_tensor=True)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                return loss.item() * n
        total = Runner().step(torch.randn(4, 3), torch.randn(4, 1))
        """, "GT101", holds="isinstance(total, float)"), Shape("""
        class Runner:
            def __init__(self):
                self.net = nn.Linear(3, 1)
                self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
            def _loss(self, x, y, keep_tensor=False):
                loss = F.mse_loss(self.net(x), y)
                loss = float(loss.detach())
                return loss, x.shape[0]
            def step(self, x, y):
                loss, n = self._loss(x, y, keep_tensor=True)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                return loss * n
        total = Runner().step(torch.randn(4, 3), torch.randn(4, 1))
        """, "GT101", line=10, raises=(AttributeError, "has no attribute 'backward'"))),
    # unseen35c (Harry24k+MAIR, a one-pixel attack): the score method runs the model under
    # no_grad and returns NumPy, the "loss" is minimised without gradients. It is not made of
    # its arguments, so the perturbation's detach is no cut of that loss. Twin: the score
    # method only normalises what it is given, and the loss is differentiated
    "method-dead-by-its-own-doing": (Shape("""
        class RandomSearch:
            def __init__(self, predict):
                self.predict = predict
            def _perturb(self, image, delta):
                out = image.clone().detach()
                out[0, 0] = delta
                return out
            def _scores(self, images):
                with torch.no_grad():
                    outs = []
                    for batch in torch.split(images, 2):
                        outs.append(self.predict(batch))
                outs = torch.cat(outs)
                return F.softmax(outs, dim=1).detach().cpu().numpy()
            def _loss(self, image, label, delta, targeted=False):
                prob = self._scores(self._perturb(image, delta))[:, label]
                if targeted:
                    return 1 - prob
                return prob
            def run(self, image, label):
                def objective(d):
                    return self._loss(image, label, d)
                return min(torch.linspace(0, 1, 5).tolist(), key=lambda d: objective(d).sum())
        net = nn.Linear(4, 3)
        best = RandomSearch(lambda x: net(x)).run(torch.rand(1, 4), 1)
        """, "GT107", holds="isinstance(best, float)"), Shape("""
        class Scorer:
            def _perturb(self, x, delta):
                return x.detach() + delta
            def _scores(self, z):
                return F.softmax(z, dim=1)
            def loss(self, net, x, y, delta):
                return F.nll_loss(torch.log(self._scores(self._perturb(net(x), delta))), y)
        net = nn.Linear(4, 3)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        loss = Scorer().loss(net, torch.randn(5, 4), torch.randint(0, 3, (5,)), 0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        """, "GT107", line=3, raises=NO_GRAD_FN)),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
