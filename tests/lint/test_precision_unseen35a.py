"""Shapes that fired wrongly on the vision projects of docs/triage/unseen35a.md (session 35),
each in another spelling than the project's and next to a buggy twin that is still reported.
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
warnings.simplefilter("ignore", DeprecationWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # MIC (`seg/mmseg/core/ddp_wrapper.py`): `@MODULE_WRAPPERS.register_module('mmseg.DDP...')`
    # is a registry's decorator (mmcv): it registers a class under a dotted key, no submodule.
    # torch's `register_module(name, module)` needs the module. Twin: a submodule registered
    # under a dotted name: KeyError
    "registry-decorator-with-a-dotted-key": (Shape("""
        class Registry:
            table = {}
            @classmethod
            def create(cls):
                return cls()
            def register_module(self, name):
                def put(cls):
                    self.table[name] = cls
                    return cls
                return put
        WRAPPERS = Registry.create()
        @WRAPPERS.register_module("seg.Wrapper")
        class Wrapper(nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner
        w = WRAPPERS.table["seg.Wrapper"](nn.Linear(2, 2))
        """, "GT417", holds="isinstance(w.inner, nn.Linear)"), Shape("""
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_module("norm.1", nn.BatchNorm1d(3))
        b = Block()
        """, "GT417", line=4, raises=(KeyError, "module name can"))),
    # Medical-SAM-Adapter (`utils.py`): an old-style Function used as a metric,
    # `DiceCoeff().forward(a, b)`: the method runs as a plain method (the instance only warns),
    # autograd never records it, its `backward` never runs (the file's gradient penalty is
    # differentiated twice elsewhere). Twins: the instance called (RuntimeError); the Function
    # applied with an intermediate on `ctx` and differentiated twice (a wrong second order)
    "legacy-function-run-as-a-plain-method": (Shape("""
        class Dice(torch.autograd.Function):
            def forward(self, a, b):
                self.inter = torch.dot(a.view(-1), b.view(-1))
                return 2 * self.inter / (a.sum() + b.sum())
            def backward(self, g):
                return g, None
        score = Dice().forward(torch.rand(4), torch.rand(4)).item()
        """, "GT705", holds="0 < score < 2"), Shape("""
        class Dice(torch.autograd.Function):
            def forward(self, a, b):
                return 2 * torch.dot(a.view(-1), b.view(-1)) / (a.sum() + b.sum())
            def backward(self, g):
                return g, None
        score = Dice()(torch.rand(4), torch.rand(4))
        """, "GT705", line=2, raises=(RuntimeError, "Legacy autograd function"))),
    "legacy-function-metric-beside-a-double-backward": (Shape("""
        class Dice(torch.autograd.Function):
            def forward(self, a, b):
                self.union = a.sum() + b.sum()
                return 2 * torch.dot(a, b) / self.union
            def backward(self, g):
                return g * 2 / self.union, None
        score = Dice().forward(torch.rand(4), torch.rand(4)).item()
        x = torch.randn(3, requires_grad=True)
        gx, = torch.autograd.grad((x ** 3).sum(), x, create_graph=True)
        gx.sum().backward()
        """, "GT781", holds="torch.allclose(x.grad, 6 * x.detach())"), Shape("""
        class Cube(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.sq = x * x
                return ctx.sq * x
            @staticmethod
            def backward(ctx, g):
                return 3 * ctx.sq * g
        x = torch.randn(3, requires_grad=True)
        gx, = torch.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
        gx.sum().backward()
        """, "GT781", line=4, raises=(RuntimeError, "does not require grad"))),
    # learning3d (`examples/test_masknet.py`): the evaluation loop collects a precision a
    # helper of the file computes from NumPy copies, and reads the list with `np.mean`: NumPy
    # converts every element with `Tensor.numpy()`, which raises on a tensor with a graph, so
    # the code itself says the values carry none. Twin: the model's loss collected with its
    # graph and summed by torch: every pass's graph is kept
    "collected-values-read-by-a-numpy-function": (Shape("""
        import numpy as np
        def metrics(tp, fp, n):
            accuracy = tp / n
            precision = tp / max(tp + fp, 1)
            return accuracy, precision
        def score(pred, gt):
            if torch.is_tensor(gt): gt = gt.detach().numpy()
            if torch.is_tensor(pred): pred = pred.detach().numpy()
            tp = int(((pred > 0) & (gt > 0)).sum())
            fp = int(((pred > 0) & (gt <= 0)).sum())
            return metrics(tp, fp, gt.shape[0])
        def evaluate(net, val_loader):
            precision_list = []
            for x, y in val_loader:
                out = net(x)
                accuracy, precision = score(out, y)
                precision_list.append(precision)
            return np.mean(precision_list)
        mean = evaluate(nn.Linear(4, 1), [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)])
        """, "GT505", holds="0 <= mean <= 1"), Shape("""
        def evaluate(net, val_loader):
            losses = []
            for x, y in val_loader:
                loss = F.mse_loss(net(x), y)
                losses.append(loss)
            return sum(losses) / len(losses)
        mean = evaluate(nn.Linear(4, 1), [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)])
        """, "GT505", line=5, holds="mean.grad_fn is not None")),
    # DenseFusion (`tools/train.py` with `lib/loss.py`, `lib/loss_refiner.py`): the refinement
    # loop feeds back `new_points` from `criterion_refine(...)`, a loss module whose `forward`
    # returns `loss_calculation(...)`, which hands the points back `.detach()`ed: no graph is
    # carried into the next pass, nor reaches the first refinement's output. Twins: the
    # helper hands them back with their history: 'backward through the graph a second time'
    "refined-points-handed-back-detached-by-the-loss-helper": (Shape("""
        def refine_loss(pred, points):
            new_points = points + pred
            dis = (new_points ** 2).mean()
            return dis, new_points.detach()
        class RefineLoss(nn.Module):
            def forward(self, pred, points):
                return refine_loss(pred, points)
        estimator = nn.Linear(3, 3)
        refiner = nn.Linear(3, 3)
        criterion = RefineLoss()
        opt = torch.optim.SGD(refiner.parameters(), lr=0.1)
        for i in range(3):
            x = torch.randn(4, 3)
            with torch.no_grad():
                est = estimator(x)
            pred0 = refiner(est)
            _, new_points = criterion(pred0, est)
            for ite in range(2):
                pred = refiner(new_points)
                dis, new_points = criterion(pred, new_points)
                dis.backward()
            opt.step()
            opt.zero_grad()
        """, "GT506", holds="refiner.weight.grad is None"), Shape("""
        def refine_loss(pred, points):
            new_points = points + pred
            dis = (new_points ** 2).mean()
            return dis, new_points
        class RefineLoss(nn.Module):
            def forward(self, pred, points):
                return refine_loss(pred, points)
        estimator = nn.Linear(3, 3)
        refiner = nn.Linear(3, 3)
        criterion = RefineLoss()
        opt = torch.optim.SGD(refiner.parameters(), lr=0.1)
        for i in range(3):
            x = torch.randn(4, 3)
            with torch.no_grad():
                est = estimator(x)
            pred0 = refiner(est)
            _, new_points = criterion(pred0, est)
            for ite in range(2):
                pred = refiner(new_points)
                dis, new_points = criterion(pred, new_points)
                dis.backward()
            opt.step()
            opt.zero_grad()
        """, "GT506", line=20, raises=(RuntimeError, "second time"))),
    "first-refinement-reaches-the-loop-only-through-detached-points": (Shape("""
        def refine_loss(pred, points):
            new_points = points + pred
            dis = (new_points ** 2).mean()
            return dis, new_points.detach()
        class RefineLoss(nn.Module):
            def forward(self, pred, points):
                return refine_loss(pred, points)
        estimator = nn.Linear(3, 3)
        refiner = nn.Linear(3, 3)
        criterion = RefineLoss()
        opt = torch.optim.SGD(refiner.parameters(), lr=0.1)
        for i in range(3):
            x = torch.randn(4, 3)
            with torch.no_grad():
                est = estimator(x)
            pred0 = refiner(est)
            _, new_points = criterion(pred0, est)
            for ite in range(2):
                pred = refiner(new_points)
                dis, new_points = criterion(pred, new_points)
                dis.backward()
            opt.step()
            opt.zero_grad()
        """, "GT507", holds="refiner.weight.grad is None"), Shape("""
        def refine_loss(pred, points):
            new_points = points + pred
            dis = (new_points ** 2).mean()
            return dis, new_points
        class RefineLoss(nn.Module):
            def forward(self, pred, points):
                return refine_loss(pred, points)
        estimator = nn.Linear(3, 3)
        refiner = nn.Linear(3, 3)
        criterion = RefineLoss()
        opt = torch.optim.SGD(refiner.parameters(), lr=0.1)
        for i in range(3):
            x = torch.randn(4, 3)
            with torch.no_grad():
                est = estimator(x)
            pred0 = refiner(est)
            _, new_points = criterion(pred0, est)
            for ite in range(2):
                pred = refiner(new_points)
                dis, new_points = criterion(pred, new_points)
                dis.backward()
            opt.step()
            opt.zero_grad()
        """, "GT507", line=16, raises=(RuntimeError, "second time"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
