"""The facts widened or added for held-out batch 34 (docs/triage/ho34.md), each as a buggy twin
that is reported on its line and a silent look-alike, in other spellings than the cases'. Every
snippet runs on real torch, and ``holds`` / ``raises`` check what the finding claims."""
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
    # GT603: the activation is a layer class given as a parameter's default and called in
    # `__init__` (NOTE [layer class given by a default]); the ReLU saves its output and the
    # residual is added into it in place
    "default-layer-class-then-inplace-add": (Shape("""
        class Unit(nn.Module):
            def __init__(self, width, nonlin=nn.ReLU, **kw):
                super().__init__()
                self.lin = nn.Linear(width, width)
                self.nonlin = nonlin(**kw)
            def forward(self, h):
                y = self.nonlin(self.lin(h))
                y += h
                return y
        unit = Unit(5)
        unit(torch.randn(3, 5)).pow(2).sum().backward()
        """, "GT603", line=8, raises=(RuntimeError, "modified by an inplace operation")), Shape("""
        class Unit(nn.Module):
            def __init__(self, width, nonlin=nn.ReLU, **kw):
                super().__init__()
                self.lin = nn.Linear(width, width)
                self.nonlin = nonlin(**kw)
            def forward(self, h):
                y = self.nonlin(self.lin(h))
                y += h
                return y
        unit = Unit(5, nonlin=nn.Hardtanh)
        unit(torch.randn(3, 5)).pow(2).sum().backward()
        ok = unit.lin.weight.grad is not None
        """, "GT603", holds="ok")),
    # GT310: a comprehension keeps the state-dict entries that require grad: none do
    # (NOTE [state-dict tensors never require grad])
    "state-dict-kept-by-flag": (Shape("""
        net = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 2))
        net[0].requires_grad_(False)
        snapshot = net.state_dict()
        kept = [name for name, t in snapshot.items() if t.requires_grad]
        """, "GT310", line=4, holds="kept == []"), Shape("""
        net = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 2))
        net[0].requires_grad_(False)
        snapshot = net.state_dict()
        live = dict(net.named_parameters())
        kept = [name for name, t in snapshot.items() if live[name].requires_grad]
        """, "GT310", holds="kept == ['1.weight', '1.bias']")),
    # GT310: a loop over a state dict saved and read back tests each value's flag
    "loaded-state-dict-loop-flag": (Shape("""
        import io
        net = nn.Linear(4, 2)
        buf = io.BytesIO()
        torch.save(net.state_dict(), buf)
        buf.seek(0)
        restored = torch.load(buf)
        n_trainable = 0
        for key, tensor in restored.items():
            if tensor.requires_grad:
                n_trainable += 1
        """, "GT310", line=9, holds="n_trainable == 0"), Shape("""
        import io
        net = nn.Linear(4, 2)
        buf = io.BytesIO()
        torch.save(net.state_dict(), buf)
        buf.seek(0)
        restored = torch.load(buf)
        n_trainable = 0
        for key, p in net.named_parameters():
            if p.requires_grad and key in restored:
                n_trainable += 1
        """, "GT310", holds="n_trainable == 2")),
    # GT731: a straight-through binarisation adds the detached difference to the hard value
    # (NOTE [straight-through term]): the weights get a zero gradient
    "straight-through-adds-hard": (Shape("""
        w = nn.Parameter(torch.randn(4, 3))
        signs = torch.sign(w)
        w_bin = signs + (signs - w).detach()
        (torch.randn(2, 4) @ w_bin).pow(2).sum().backward()
        """, "GT731", line=3, holds="w.grad.abs().sum().item() == 0.0"), Shape("""
        w = nn.Parameter(torch.randn(4, 3))
        signs = torch.sign(w)
        w_bin = w + (signs - w).detach()
        (torch.randn(2, 4) @ w_bin).pow(2).sum().backward()
        """, "GT731", holds="w.grad.abs().sum().item() > 0.0")),
    # GT478: a function of the file asks the DDP wrapper for a method of the wrapped class
    # (NOTE [wrapper hides the module's methods]): getattr gives the default
    "ddp-wrapper-asked-for-model-method": (Shape("""
        import os, tempfile
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        class Enc(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(3, 3)
                self.scale = nn.Parameter(torch.ones(3))
            def decay_exempt(self):
                return ["scale"]
            def forward(self, x):
                return self.lin(x) * self.scale
        def exempt_names(net):
            ask = getattr(net, "decay_exempt", None)
            return ask() if ask is not None else []
        where = "file://" + os.path.join(tempfile.mkdtemp(), "pg")
        dist.init_process_group("gloo", init_method=where, rank=0, world_size=1)
        wrapped = DistributedDataParallel(Enc())
        n_exempt = len(exempt_names(wrapped))
        dist.destroy_process_group()
        """, "GT478", line=19, holds="n_exempt == 0"), Shape("""
        import os, tempfile
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        class Enc(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(3, 3)
                self.scale = nn.Parameter(torch.ones(3))
            def decay_exempt(self):
                return ["scale"]
            def forward(self, x):
                return self.lin(x) * self.scale
        def exempt_names(net):
            ask = getattr(net, "decay_exempt", None)
            return ask() if ask is not None else []
        where = "file://" + os.path.join(tempfile.mkdtemp(), "pg")
        dist.init_process_group("gloo", init_method=where, rank=0, world_size=1)
        wrapped = DistributedDataParallel(Enc())
        n_exempt = len(exempt_names(wrapped.module))
        dist.destroy_process_group()
        """, "GT478", holds="n_exempt == 1")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_twin_reported(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_lookalike_silent(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
