"""static29i (held-out 23's last misses as mechanisms): each change as a buggy twin real torch
shows the bug on and a correct look-alike, through the checker and on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
torch.manual_seed(0)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT721, skorch#639: the optimizer class is given to the constructor (`optimizer(params,
    # **kw)` with `torch.optim.LBFGS` at the call site), the closure backpropagates inside a
    # method it calls, and the one `zero_grad()` sits after `step(closure)`: LBFGS's second
    # evaluation starts from the first one's gradient. Reported on the misplaced clear.
    # Look-alike: the clear moved into the closure (the fix)
    "optimizer-class-from-constructor": (Shape("""
        class Net:
            def __init__(self, module, optimizer, **kw):
                self.module_ = module
                self.optimizer_ = optimizer(module.parameters(), **kw)
                self.dirty = []

            def single(self, x, y):
                w = self.module_.weight
                self.dirty.append(w.grad is not None and bool(w.grad.abs().sum() > 0))
                loss = ((self.module_(x) - y) ** 2).mean()
                loss.backward()
                return loss

            def train_step(self, x, y):
                def step_fn():
                    self.optimizer_.zero_grad()
                    return self.single(x, y)
                self.optimizer_.step(step_fn)

        net = Net(nn.Linear(3, 1), torch.optim.LBFGS, lr=0.5)
        net.train_step(torch.randn(16, 3), torch.randn(16, 1))
        """, "GT721", holds="len(net.dirty) > 1 and not any(net.dirty)"), Shape("""
        class Net:
            def __init__(self, module, optimizer, **kw):
                self.module_ = module
                self.optimizer_ = optimizer(module.parameters(), **kw)
                self.dirty = []

            def single(self, x, y):
                w = self.module_.weight
                self.dirty.append(w.grad is not None and bool(w.grad.abs().sum() > 0))
                loss = ((self.module_(x) - y) ** 2).mean()
                loss.backward()
                return loss

            def train_step(self, x, y):
                def step_fn():
                    return self.single(x, y)
                self.optimizer_.step(step_fn)
                self.optimizer_.zero_grad()

        net = Net(nn.Linear(3, 1), torch.optim.LBFGS, lr=0.5)
        net.train_step(torch.randn(16, 3), torch.randn(16, 1))
        """, "GT721", 18, holds="len(net.dirty) > 1 and any(net.dirty[1:])")),
    # VARIANT: a helper function of the file runs the backward, called from a lambda closure
    # of a locally built LBFGS; no clear anywhere: reported on the helper's backward.
    # Look-alike: the helper clears first
    "helper-backward-in-lambda": (Shape("""
        dirty = []
        def evaluate(model, opt, x, y):
            opt.zero_grad()
            dirty.append(model.weight.grad is not None and bool(model.weight.grad.abs().sum() > 0))
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            return loss

        model = nn.Linear(3, 1)
        opt = torch.optim.LBFGS(model.parameters(), lr=0.5)
        x, y = torch.randn(16, 3), torch.randn(16, 1)
        opt.step(lambda: evaluate(model, opt, x, y))
        """, "GT721", holds="len(dirty) > 1 and not any(dirty)"), Shape("""
        dirty = []
        def evaluate(model, opt, x, y):
            dirty.append(model.weight.grad is not None and bool(model.weight.grad.abs().sum() > 0))
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            return loss

        model = nn.Linear(3, 1)
        opt = torch.optim.LBFGS(model.parameters(), lr=0.5)
        x, y = torch.randn(16, 3), torch.randn(16, 1)
        opt.step(lambda: evaluate(model, opt, x, y))
        """, "GT721", 5, holds="len(dirty) > 1 and any(dirty[1:])")),
    # VARIANT: the backward inline in a local closure, and `opt.zero_grad()` right after
    # `opt.step(closure)` in a loop: reported on that clear (the line the fix moves).
    # Look-alike: the constructor's call site asks for one evaluation (`max_iter=1`), so a
    # clear per step is enough
    "clear-after-step-inline-closure": (Shape("""
        class Fit:
            def __init__(self, model, optimizer, **kw):
                self.model = model
                self.opt = optimizer(model.parameters(), **kw)
                self.dirty = []

            def run(self, x, y):
                for _ in range(3):
                    def closure():
                        w = self.model.weight
                        self.dirty.append(w.grad is not None and bool(w.grad.abs().sum() > 0))
                        loss = ((self.model(x) - y) ** 2).mean()
                        loss.backward()
                        return loss
                    self.opt.step(closure)
                    self.opt.zero_grad()

        fit = Fit(nn.Linear(3, 1), torch.optim.LBFGS, lr=0.5, max_iter=1)
        fit.run(torch.randn(16, 3), torch.randn(16, 1))
        """, "GT721", holds="len(fit.dirty) == 3 and not any(fit.dirty)"), Shape("""
        def fit(model, x, y):
            opt = torch.optim.LBFGS(model.parameters(), lr=0.5)
            dirty = []
            for _ in range(3):
                def closure():
                    dirty.append(model.weight.grad is not None and bool(model.weight.grad.abs().sum() > 0))
                    loss = ((model(x) - y) ** 2).mean()
                    loss.backward()
                    return loss
                opt.step(closure)
                opt.zero_grad()
            return dirty

        dirty = fit(nn.Linear(3, 1), torch.randn(16, 3), torch.randn(16, 1))
        """, "GT721", 11, holds="any(dirty)")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
