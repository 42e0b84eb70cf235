"""The facts added for held-out batch 38 (docs/triage/ho38.md), each as a buggy twin that is
reported on its line and a silent look-alike, in other spellings than the cases'. Every snippet
runs on real torch, and ``holds`` / ``raises`` check what the finding claims."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT123: a child module's `train` takes a stage key first and hands the later parameter
    # to `.train(...)`: the parent's `eval()` calls `child.train(False)` and the key lookup
    # fails (NOTE [train override that takes the mode second]); the look-alike keeps the mode
    # first and the key after it
    "train-override-with-mode-second": (Shape("""
        class Staged(nn.Module):
            def __init__(self):
                super().__init__()
                self.stages = nn.ModuleDict({"a": nn.Linear(4, 4), "b": nn.Dropout(0.5)})
            def train(self, stage, flag=True):
                self.stages[stage].train(flag)
                return self
            def forward(self, x):
                return self.stages["b"](self.stages["a"](x))
        net = nn.Sequential(Staged(), nn.Linear(4, 1))
        net(torch.randn(2, 4)).sum().backward()
        net.eval()
        """, "GT123", line=5, raises=(KeyError, "False")), Shape("""
        class Staged(nn.Module):
            def __init__(self):
                super().__init__()
                self.stages = nn.ModuleDict({"a": nn.Linear(4, 4), "b": nn.Dropout(0.5)})
            def train(self, flag=True, stage=None):
                for key, part in self.stages.items():
                    if stage is None or key == stage:
                        part.train(flag)
                self.training = flag
                return self
            def forward(self, x):
                return self.stages["b"](self.stages["a"](x))
        net = nn.Sequential(Staged(), nn.Linear(4, 1))
        net.eval()
        """, "GT123", holds="not net[0].stages['b'].training")),
    # GT123: the same override, with `eval` defined on a base class of the file: silent;
    # the twin without that base is reported
    "train-override-with-eval-on-base": (Shape("""
        class Freezable(nn.Module):
            def unfreeze(self, part):
                getattr(self, part).requires_grad_(True)
        class Model(Freezable):
            def __init__(self):
                super().__init__()
                self.enc = nn.Linear(4, 4)
            def train(self, part, on=True):
                getattr(self, part).requires_grad_(on)
                return self
        m = Model()
        m.eval()
        """, "GT123", line=8, raises=(TypeError, "attribute name must be string")), Shape("""
        class Freezable(nn.Module):
            def eval(self):
                return nn.Module.train(self, False)
        class Model(Freezable):
            def __init__(self):
                super().__init__()
                self.enc = nn.Linear(4, 4)
            def train(self, part, on=True):
                getattr(self, part).requires_grad_(on)
                return self
        m = Model()
        m.eval()
        """, "GT123", holds="not m.training and m.enc.weight.requires_grad")),
    # GT403: a helper wraps the tensor in a Parameter, then returns only its cast copy: the
    # module attribute is a plain non-leaf tensor and the optimizer refuses it
    # (NOTE [parameter dropped for its moved copy]); the look-alike keeps the Parameter and
    # caches the cast copy next to it
    "parameter-dropped-for-its-cast-copy": (Shape("""
        def as_weight(t):
            w = nn.Parameter(t)
            return w.double()
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = as_weight(torch.randn(3, 3))
        net = Net()
        torch.optim.SGD([net.w], lr=0.1)
        """, "GT403", line=3, raises=(ValueError, "can't optimize a non-leaf Tensor")), Shape("""
        def register(module, name, t, cache):
            w = nn.Parameter(t)
            module.register_parameter(name, w)
            cache[name] = w.double()
        net = nn.Module()
        cache = {}
        register(net, "w", torch.randn(3, 3), cache)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        """, "GT403", holds="cache['w'].grad_fn is not None and len(list(net.parameters())) == 1")),
    # GT124: a custom op made with `custom_op` imported by name, run in a module's forward on a
    # layer's output, differentiated with `torch.autograd.grad`: no autograd formula, so the
    # gradient fails (NOTE [custom op without an autograd formula]); the look-alike wires it
    # with `torch.library.register_autograd("ns::op", ...)`
    "custom-op-in-forward-without-autograd": (Shape("""
        from torch.library import custom_op
        @custom_op("ho38twin::double_it", mutates_args=())
        def double_it(x: torch.Tensor) -> torch.Tensor:
            return x * 2
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(3, 3)
            def forward(self, x):
                return double_it(self.lin(x)).sum()
        b = Block()
        (g,) = torch.autograd.grad(b(torch.randn(2, 3)), [b.lin.weight])
        """, "GT124", line=2, raises=(RuntimeError, "no autograd formula was registered")),
        Shape("""
        from torch.library import custom_op
        @custom_op("ho38ok::double_it", mutates_args=())
        def double_it(x: torch.Tensor) -> torch.Tensor:
            return x * 2
        def _bwd(ctx, grad):
            return grad * 2
        torch.library.register_autograd("ho38ok::double_it", _bwd)
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(3, 3)
            def forward(self, x):
                return double_it(self.lin(x)).sum()
        b = Block()
        (g,) = torch.autograd.grad(b(torch.randn(2, 3)), [b.lin.weight])
        """, "GT124", holds="g.abs().sum() > 0")),
    # GT124: the op runs in the forward only under `torch.no_grad()` (a statistic the loss
    # does not use): silent, and backward through the rest works; the twin calls it with grad on
    "custom-op-run-under-no-grad-in-forward": (Shape("""
        @torch.library.custom_op("ho38twin::rms", mutates_args=())
        def rms(x: torch.Tensor) -> torch.Tensor:
            return x.pow(2).mean().sqrt()
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(3, 3)
                self.last = None
            def forward(self, x):
                y = self.lin(x)
                return y.sum() + rms(y)
        net = Net()
        net(torch.randn(2, 3)).backward()
        """, "GT124", line=1, raises=(RuntimeError, "no autograd formula was registered")),
        Shape("""
        @torch.library.custom_op("ho38ok::rms", mutates_args=())
        def rms(x: torch.Tensor) -> torch.Tensor:
            return x.pow(2).mean().sqrt()
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(3, 3)
                self.last = None
            def forward(self, x):
                y = self.lin(x)
                with torch.no_grad():
                    self.last = rms(y)
                return y.sum()
        net = Net()
        net(torch.randn(2, 3)).backward()
        """, "GT124", holds="net.lin.weight.grad is not None and net.last is not None")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_twin_reported(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_lookalike_silent(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
