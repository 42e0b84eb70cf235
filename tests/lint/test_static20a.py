"""Readings of docs/triage/static20a.md, each in spellings the real-world cases do not use (a
method vs a script vs a helper, another nesting, the other API), as a buggy twin that real
torch fails on and a correct look-alike that runs; the checker reports the first and stays
silent on the second."""
from __future__ import annotations

from importlib.util import find_spec

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")
# find_spec, not an import: the shapes import matplotlib when they run (an import here costs
# every xdist worker ~0.5 s at collection)
pytestmark = pytest.mark.skipif(find_spec("matplotlib") is None,
                                reason="matplotlib is not installed")

PRELUDE = '''
import warnings
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

NUMPY_ERR = (RuntimeError, "Can't call numpy\\(\\) on Tensor that requires grad")

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT116, a method of a plain class given a model's output by an instance call (PIXIE's
    # Visualizer): the method converts its argument's slice with NumPy. Look-alike: the
    # caller detaches
    "numpy-in-method-of-passed-output": (Shape("""
        class Canvas:
            def draw(self, heat):
                img = heat[0].cpu().numpy()
                return img.mean()
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 1, 3, padding=1)
            def forward(self, x):
                return self.conv(x)
        net = Net()
        canvas = Canvas()
        heatmap = net(torch.rand(1, 3, 8, 8))
        value = canvas.draw(heatmap.detach())
        """, "GT116", holds="isinstance(value, np.floating)"), Shape("""
        class Canvas:
            def draw(self, heat):
                img = heat[0].cpu().numpy()
                return img.mean()
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 1, 3, padding=1)
            def forward(self, x):
                return self.conv(x)
        net = Net()
        canvas = Canvas()
        heatmap = net(torch.rand(1, 3, 8, 8))
        value = canvas.draw(heatmap)
        """, "GT116", 3, raises=NUMPY_ERR)),
    # GT116, two helpers deep (liegroups' `from_matrix` -> `is_valid_matrix`), the model
    # call given straight as the argument, `np.asarray` instead of `.numpy()`. Look-alike:
    # the outer call runs under no_grad, where `.numpy()` works
    "numpy-two-helpers-below-model-call": (Shape("""
        def to_array(t):
            return np.asarray(t.float())
        def spread(pred):
            return float(to_array(pred).std())
        model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
        with torch.no_grad():
            s = spread(model(torch.randn(5, 4)))
        """, "GT116", holds="s > 0"), Shape("""
        def to_array(t):
            return np.asarray(t.float())
        def spread(pred):
            return float(to_array(pred).std())
        model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
        s = spread(model(torch.randn(5, 4)))
        """, "GT116", 2, raises=NUMPY_ERR)),
    # GT116, a staticmethod called through its class, inside a `main()` the script runs;
    # `np.linalg` reads the tensor. Look-alike: the method is decorated with no_grad
    "numpy-linalg-in-staticmethod-called-from-main": (Shape("""
        class Check:
            @staticmethod
            @torch.no_grad()
            def rank(m):
                return np.linalg.matrix_rank(m.cpu().numpy())
        def main():
            proj = nn.Linear(3, 3)
            out = proj(torch.eye(3))
            return Check.rank(out)
        r = main()
        """, "GT116", holds="r == 3"), Shape("""
        class Check:
            @staticmethod
            def rank(m):
                return np.linalg.matrix_rank(m)
        def main():
            proj = nn.Linear(3, 3)
            out = proj(torch.eye(3))
            return Check.rank(out)
        r = main()
        """, "GT116", 4, raises=NUMPY_ERR)),
    # GT116, a pyplot call given an expression of a Parameter (fastai's `plt.scatter(x[:, 0],
    # x @ a)`), inside a function the script calls: `plt.plot` and `*` instead. Look-alike:
    # the plotted value is detached
    "plot-of-parameter-expression-in-function": (Shape("""
        slope = nn.Parameter(torch.tensor(2.0))
        def show(xs):
            plt.plot(xs, (xs * slope).detach())
            return len(plt.gca().lines)
        n = show(torch.linspace(0, 1, 5))
        """, "GT116", holds="n >= 1"), Shape("""
        slope = nn.Parameter(torch.tensor(2.0))
        def show(xs):
            plt.plot(xs, xs * slope)
            return len(plt.gca().lines)
        n = show(torch.linspace(0, 1, 5))
        """, "GT116", 3, raises=NUMPY_ERR)),
    # GT116, an embedding's weight indexed and converted in a loop of a function (the
    # embedding inspector), here `np.array` of a row of a global `nn.Embedding`.
    # Look-alike: the rows are read under no_grad
    "numpy-of-global-embedding-rows": (Shape("""
        table = nn.Embedding(10, 4)
        def rows(ids):
            with torch.no_grad():
                picked = table.weight[ids]
            return [np.array(picked[i]) for i in range(len(ids))]
        got = rows(torch.tensor([1, 2]))
        """, "GT116", holds="len(got) == 2"), Shape("""
        table = nn.Embedding(10, 4)
        def rows(ids):
            picked = table.weight[ids]
            return [np.array(picked[i]) for i in range(len(ids))]
        got = rows(torch.tensor([1, 2]))
        """, "GT116", 4, raises=NUMPY_ERR)),
    # GT116 left alone: the model is frozen, its output needs no grad (a file that freezes
    # is not read); the twin is a plain script conversion of a trained head's output
    "numpy-of-frozen-model-output": (Shape("""
        backbone = nn.Linear(4, 4)
        for p in backbone.parameters():
            p.requires_grad = False
        feats = backbone(torch.randn(2, 4))
        arr = feats.numpy()
        """, "GT116", holds="arr.shape == (2, 4)"), Shape("""
        head = nn.Linear(4, 4)
        feats = head(torch.randn(2, 4)).relu()
        arr = feats.numpy()
        """, "GT116", 3, raises=NUMPY_ERR)),
    # GT603, an element of a list of block outputs written in place (the FPN top-down
    # `laterals[i - 1] += F.interpolate(...)`): here a plain loop over the blocks with one
    # input and `outs[0] += outs[1]`. Look-alike: the sum is made out of place
    "iadd-into-listed-relu-block-output": (Shape("""
        class Heads(nn.Module):
            def __init__(self):
                super().__init__()
                self.heads = nn.ModuleList(nn.Sequential(nn.Linear(4, 4), nn.ReLU())
                                           for _ in range(2))
            def forward(self, x):
                outs = [head(x) for head in self.heads]
                outs[0] = outs[0] + outs[1]
                return outs[0]
        m = Heads()
        m(torch.randn(3, 4)).sum().backward()
        """, "GT603", holds="m.heads[0][0].weight.grad is not None"), Shape("""
        class Heads(nn.Module):
            def __init__(self):
                super().__init__()
                self.heads = nn.ModuleList(nn.Sequential(nn.Linear(4, 4), nn.ReLU())
                                           for _ in range(2))
            def forward(self, x):
                outs = [head(x) for head in self.heads]
                outs[0] += outs[1]
                return outs[0]
        m = Heads()
        m(torch.randn(3, 4)).sum().backward()
        """, "GT603", 8, raises=(RuntimeError, "modified by an inplace operation"))),
    # GT603, the list built by index (`[self.stages[i](xs[i]) for i in range(n)]`) from a
    # module class of the file ending in an in-place ELU, the write a `*=` in a loop.
    # Look-alike: the stages end in SiLU, which saves its input, not its output
    "imul-into-indexed-list-of-elu-stage-outputs": (Shape("""
        class Stage(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.conv = nn.Conv1d(c, c, 1)
                self.act = nn.SiLU(inplace=True)
            def forward(self, x):
                return self.act(self.conv(x))
        class Neck(nn.Module):
            def __init__(self, c=2, n=3):
                super().__init__()
                self.stages = nn.ModuleList([Stage(c) for _ in range(n)])
            def forward(self, xs):
                feats = [self.stages[i](xs[i]) for i in range(len(xs))]
                for i in range(1, len(feats)):
                    feats[i] *= 0.5
                return torch.cat(feats, -1)
        neck = Neck()
        neck([torch.randn(1, 2, 4) for _ in range(3)]).sum().backward()
        """, "GT603", holds="neck.stages[0].conv.weight.grad is not None"), Shape("""
        class Stage(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.conv = nn.Conv1d(c, c, 1)
                self.act = nn.ELU(inplace=True)
            def forward(self, x):
                return self.act(self.conv(x))
        class Neck(nn.Module):
            def __init__(self, c=2, n=3):
                super().__init__()
                self.stages = nn.ModuleList([Stage(c) for _ in range(n)])
            def forward(self, xs):
                feats = [self.stages[i](xs[i]) for i in range(len(xs))]
                for i in range(1, len(feats)):
                    feats[i] *= 0.5
                return torch.cat(feats, -1)
        neck = Neck()
        neck([torch.randn(1, 2, 4) for _ in range(3)]).sum().backward()
        """, "GT603", 15, raises=(RuntimeError, "modified by an inplace operation"))),
    # GT603, `enumerate` over the blocks (mmocr's FPNF); look-alike: the element is replaced
    # by a copy before the write
    "iadd-into-enumerated-list-element": (Shape("""
        class Pyramid(nn.Module):
            def __init__(self, n=3):
                super().__init__()
                self.convs = nn.ModuleList([nn.Sequential(nn.Conv2d(2, 2, 1), nn.ReLU(True))
                                            for _ in range(n)])
            def forward(self, inputs):
                lat = [conv(inputs[i]) for i, conv in enumerate(self.convs)]
                lat[0] = lat[0].clone()
                lat[0] += lat[1]
                return lat[0]
        p = Pyramid()
        p([torch.randn(1, 2, 4, 4) for _ in range(3)]).sum().backward()
        """, "GT603", holds="p.convs[0][0].weight.grad is not None"), Shape("""
        class Pyramid(nn.Module):
            def __init__(self, n=3):
                super().__init__()
                self.convs = nn.ModuleList([nn.Sequential(nn.Conv2d(2, 2, 1), nn.ReLU(True))
                                            for _ in range(n)])
            def forward(self, inputs):
                lat = [conv(inputs[i]) for i, conv in enumerate(self.convs)]
                for i in range(len(lat) - 1, 0, -1):
                    lat[i - 1] += lat[i]
                return lat[0]
        p = Pyramid()
        p([torch.randn(1, 2, 4, 4) for _ in range(3)]).sum().backward()
        """, "GT603", 9, raises=(RuntimeError, "modified by an inplace operation"))),
    # GT515 through a scheduler class of the file (SSD's `WarmupMultiStepLR(LambdaLR)`): the
    # analysis layer reads an instance of a subclass of a torch scheduler as a scheduler,
    # here two classes deep, stepped at the start of a script's epoch loop. Look-alike:
    # stepped after the optimizer
    "own-scheduler-subclass-stepped-first-in-script": (Shape("""
        class Halving(torch.optim.lr_scheduler.LambdaLR):
            def __init__(self, optimizer):
                super().__init__(optimizer, lambda it: 0.5 ** it)
        class Warm(Halving):
            pass
        net = nn.Linear(2, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        sched = Warm(opt)
        lrs = []
        for epoch in range(2):
            lrs.append(opt.param_groups[0]["lr"])
            opt.zero_grad()
            net(torch.randn(4, 2)).pow(2).mean().backward()
            opt.step()
            sched.step()
        """, "GT515", holds="lrs[0] == 0.1"), Shape("""
        class Halving(torch.optim.lr_scheduler.LambdaLR):
            def __init__(self, optimizer):
                super().__init__(optimizer, lambda it: 0.5 ** it)
        class Warm(Halving):
            pass
        net = nn.Linear(2, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        sched = Warm(opt)
        lrs = []
        for epoch in range(2):
            sched.step()
            lrs.append(opt.param_groups[0]["lr"])
            opt.zero_grad()
            net(torch.randn(4, 2)).pow(2).mean().backward()
            opt.step()
        """, "GT515", 11, holds="lrs[0] == 0.05")),
    # GT515, the scheduler subclass built by a helper (`make_policy`, a name that says
    # nothing) inside `main()`. Look-alike: stepped after the optimizer
    "own-scheduler-subclass-from-helper-in-main": (Shape("""
        from torch.optim.lr_scheduler import MultiplicativeLR
        class Decay(MultiplicativeLR):
            def __init__(self, optimizer, factor):
                super().__init__(optimizer, lambda _: factor)
        def make_policy(opt):
            return Decay(opt, 0.5)
        def main():
            model = nn.Linear(2, 1)
            opt = torch.optim.SGD(model.parameters(), lr=1.0)
            warm_sched = make_policy(opt)
            seen = []
            for x in [torch.randn(3, 2)] * 2:
                seen.append(opt.param_groups[0]["lr"])
                opt.zero_grad()
                model(x).sum().backward()
                opt.step()
                warm_sched.step()
            return seen
        seen = main()
        """, "GT515", holds="seen[0] == 1.0"), Shape("""
        from torch.optim.lr_scheduler import MultiplicativeLR
        class Decay(MultiplicativeLR):
            def __init__(self, optimizer, factor):
                super().__init__(optimizer, lambda _: factor)
        def make_policy(opt):
            return Decay(opt, 0.5)
        def main():
            model = nn.Linear(2, 1)
            opt = torch.optim.SGD(model.parameters(), lr=1.0)
            warm_sched = make_policy(opt)
            seen = []
            for x in [torch.randn(3, 2)] * 2:
                warm_sched.step()
                seen.append(opt.param_groups[0]["lr"])
                opt.zero_grad()
                model(x).sum().backward()
                opt.step()
            return seen
        seen = main()
        """, "GT515", 13, holds="seen[0] == 0.5")),
    # GT603 through an activation chosen by a conditional expression on a constructor
    # argument (YOLOv4's `nn.ReLU(inplace=True) if activate == "relu" else nn.Mish()`): the
    # constructing call's constant picks the arm. Look-alike: the call picks the other arm
    "iadd-after-activation-picked-by-constructor-argument": (Shape("""
        class ConvAct(nn.Module):
            def __init__(self, c, act="gelu"):
                super().__init__()
                self.conv = nn.Conv2d(c, c, 1)
                self.act = nn.ReLU(inplace=True) if act == "relu" else nn.GELU()
            def forward(self, x):
                return self.act(self.conv(x))
        class Res(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.body = ConvAct(c, act="gelu")
            def forward(self, x):
                y = self.body(x)
                y += x
                return y
        r = Res(2)
        r(torch.randn(1, 2, 3, 3)).sum().backward()
        """, "GT603", holds="r.body.conv.weight.grad is not None"), Shape("""
        class ConvAct(nn.Module):
            def __init__(self, c, act="gelu"):
                super().__init__()
                self.conv = nn.Conv2d(c, c, 1)
                self.act = nn.ReLU(inplace=True) if act == "relu" else nn.GELU()
            def forward(self, x):
                return self.act(self.conv(x))
        class Res(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.body = ConvAct(c, act="relu")
            def forward(self, x):
                y = self.body(x)
                y += x
                return y
        r = Res(2)
        r(torch.randn(1, 2, 3, 3)).sum().backward()
        """, "GT603", 14, raises=(RuntimeError, "modified by an inplace operation"))),
    # GT603, the flag a keyword-only boolean passed on through an outer block's argument
    # (its default decides) into blocks of an `nn.Sequential`, the write a `*=`.
    # Look-alike: the outer default picks SiLU, which saves its input
    "imul-after-flagged-relu-passed-through-sequential": (Shape("""
        class Unit(nn.Module):
            def __init__(self, c, *, relu=False):
                super().__init__()
                self.lin = nn.Linear(c, c)
                self.act = nn.SiLU() if not relu else nn.ReLU()
            def forward(self, x):
                return self.act(self.lin(x))
        class Tower(nn.Module):
            def __init__(self, c=3, relu=False):
                super().__init__()
                self.units = nn.Sequential(Unit(c, relu=relu), Unit(c, relu=relu))
            def forward(self, x):
                h = self.units(x)
                h *= 0.5
                return h
        t = Tower()
        t(torch.randn(2, 3)).sum().backward()
        """, "GT603", holds="t.units[0].lin.weight.grad is not None"), Shape("""
        class Unit(nn.Module):
            def __init__(self, c, *, relu=False):
                super().__init__()
                self.lin = nn.Linear(c, c)
                self.act = nn.SiLU() if not relu else nn.ReLU()
            def forward(self, x):
                return self.act(self.lin(x))
        class Tower(nn.Module):
            def __init__(self, c=3, relu=True):
                super().__init__()
                self.units = nn.Sequential(Unit(c, relu=relu), Unit(c, relu=relu))
            def forward(self, x):
                h = self.units(x)
                h *= 0.5
                return h
        t = Tower()
        t(torch.randn(2, 3)).sum().backward()
        """, "GT603", 14, raises=(RuntimeError, "modified by an inplace operation"))),
    # GT205 through the hidden state a loop of reentrant checkpoints carries, made by an
    # embedding that a `named_parameters` filter freezes (FastChat's LoRA LLaMA): no input of
    # any checkpoint requires grad, the blocks get no gradient. Here the filter is
    # `not n.startswith("tok")` and the flag test `self.ckpt`. Look-alike: non-reentrant
    "checkpoint-loop-after-embedding-frozen-by-name-filter": (Shape("""
        from torch.utils.checkpoint import checkpoint
        class TinyLM(nn.Module):
            def __init__(self):
                super().__init__()
                self.tok = nn.Embedding(11, 4)
                self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
                self.head = nn.Linear(4, 11)
                self.ckpt = True
            def forward(self, token_ids):
                h = self.tok(token_ids)
                for blk in self.blocks:
                    if self.ckpt:
                        h = checkpoint(blk, h, use_reentrant=False)
                    else:
                        h = blk(h)
                return self.head(h)
        lm = TinyLM()
        for n, p in lm.named_parameters():
            p.requires_grad = not n.startswith("tok")
        lm(torch.randint(0, 11, (2, 3))).sum().backward()
        """, "GT205", holds="lm.blocks[0].weight.grad is not None"), Shape("""
        from torch.utils.checkpoint import checkpoint
        class TinyLM(nn.Module):
            def __init__(self):
                super().__init__()
                self.tok = nn.Embedding(11, 4)
                self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
                self.head = nn.Linear(4, 11)
                self.ckpt = True
            def forward(self, token_ids):
                h = self.tok(token_ids)
                for blk in self.blocks:
                    if self.ckpt:
                        h = checkpoint(blk, h, use_reentrant=True)
                    else:
                        h = blk(h)
                return self.head(h)
        lm = TinyLM()
        for n, p in lm.named_parameters():
            p.requires_grad = not n.startswith("tok")
        lm(torch.randint(0, 11, (2, 3))).sum().backward()
        """, "GT205", 13, holds="lm.blocks[0].weight.grad is None")),
    # GT205, the whole model frozen with `requires_grad_(False)` and adapters attached after
    # (diffusers' LoRA text encoder), the checkpoint's result an element of a tuple.
    # Look-alike: only the blocks are frozen, the embedding still trains
    "checkpoint-loop-after-model-frozen-then-adapted": (Shape("""
        from torch.utils.checkpoint import checkpoint
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(4, 4)
                self.adapter = None
            def forward(self, x):
                y = self.lin(x)
                return (y if self.adapter is None else y + self.adapter(x),)
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(9, 4)
                self.layers = nn.ModuleList([Block(), Block()])
            def forward(self, input_ids):
                hidden = self.embed(input_ids)
                for layer in self.layers:
                    outs = checkpoint(layer, hidden, use_reentrant=True)
                    hidden = outs[0]
                return hidden
        enc = Encoder()
        for blk in enc.layers:
            blk.lin.requires_grad_(False)
        head = nn.Linear(4, 1)
        for blk in enc.layers:
            blk.adapter = nn.Linear(4, 4)
        head(enc(torch.randint(0, 9, (2, 3)))).sum().backward()
        """, "GT205", holds="enc.layers[0].adapter.weight.grad is not None"), Shape("""
        from torch.utils.checkpoint import checkpoint
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(4, 4)
                self.adapter = None
            def forward(self, x):
                y = self.lin(x)
                return (y if self.adapter is None else y + self.adapter(x),)
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(9, 4)
                self.layers = nn.ModuleList([Block(), Block()])
            def forward(self, input_ids):
                hidden = self.embed(input_ids)
                for layer in self.layers:
                    outs = checkpoint(layer, hidden, use_reentrant=True)
                    hidden = outs[0]
                return hidden
        enc = Encoder()
        enc.requires_grad_(False)
        head = nn.Linear(4, 1)
        for blk in enc.layers:
            blk.adapter = nn.Linear(4, 4)
        head(enc(torch.randint(0, 9, (2, 3)))).sum().backward()
        """, "GT205", 18, holds="enc.layers[0].adapter.weight.grad is None")),
    # GT608 through a function's parameter (Score-CAM's `denormalize(tensor)`: its caller
    # passes an input made with `requires_grad_()`): the rows met by iterating it are
    # multi-output views. Here a Parameter-derived product given to a helper that scales its
    # rows. Look-alike: the caller runs it under no_grad
    "row-write-in-helper-given-grad-tensor": (Shape("""
        def scale_rows(t, k):
            for row, f in zip(t, k):
                row.mul_(f)
            return t
        w = nn.Parameter(torch.randn(3, 2))
        with torch.no_grad():
            out = scale_rows(w * 1.0, [1.0, 2.0, 3.0])
        """, "GT608", holds="not out.requires_grad"), Shape("""
        def scale_rows(t, k):
            for row, f in zip(t, k):
                row.mul_(f)
            return t
        w = nn.Parameter(torch.randn(3, 2))
        out = scale_rows(w * 1.0, [1.0, 2.0, 3.0])
        """, "GT608", 3, raises=(RuntimeError, "returns multiple views"))),
    # GT608, a method given a model's output through another function (two calls), the view
    # a piece of `chunk`. Look-alike: the piece is cloned before the write
    "chunk-write-in-method-two-calls-below-model": (Shape("""
        class Jitter:
            def apply(self, x):
                a, b = x.chunk(2, dim=-1)
                a = a.clone()
                a.add_(0.1)
                return torch.cat([a, b], -1)
        net = nn.Linear(4, 4)
        jit = Jitter()
        def run(batch):
            return jit.apply(net(batch))
        y = run(torch.randn(2, 4))
        """, "GT608", holds="y.requires_grad"), Shape("""
        class Jitter:
            def apply(self, x):
                a, b = x.chunk(2, dim=-1)
                a.add_(0.1)
                return torch.cat([a, b], -1)
        net = nn.Linear(4, 4)
        jit = Jitter()
        def run(batch):
            return jit.apply(net(batch))
        y = run(torch.randn(2, 4))
        """, "GT608", 4, raises=(RuntimeError, "returns multiple views"))),
    # GT608 through a transform object's `__call__` (AdversarialDeepFakes' `Normalize`):
    # the call of the instance passes a resized input made with `requires_grad=True`
    # (through `F.interpolate`, in a helper). Look-alike: the transform clones first
    "row-write-in-transform-call-on-resized-grad-input": (Shape("""
        class Standardize:
            def __init__(self, mean, std):
                self.mean, self.std = mean, std
            def __call__(self, img):
                img = img.clone()
                out = []
                for ch, m, s in zip(img, self.mean, self.std):
                    out.append((ch - m) / s)
                return torch.stack(out)
        norm = Standardize([0.5] * 3, [0.2] * 3)
        def prep(x):
            small = F.interpolate(x[None], size=(4, 4))[0]
            return norm(small)
        x = torch.rand(3, 8, 8, requires_grad=True)
        y = prep(x)
        """, "GT608", holds="y.requires_grad"), Shape("""
        class Standardize:
            def __init__(self, mean, std):
                self.mean, self.std = mean, std
            def __call__(self, img):
                for ch, m, s in zip(img, self.mean, self.std):
                    ch.sub_(m).div_(s)
                return img
        norm = Standardize([0.5] * 3, [0.2] * 3)
        def prep(x):
            small = F.interpolate(x[None], size=(4, 4))[0]
            return norm(small)
        x = torch.rand(3, 8, 8, requires_grad=True)
        y = prep(x)
        """, "GT608", 6, raises=(RuntimeError, "returns multiple views"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
