"""Readings of docs/triage/static22a.md, written from each mechanism's sentence before reading
the code of the case it came from: buggy twins in several shapes (a script loop, a method of a
trainer class, a helper one call away, a Lightning module, another spelling of the API) that
real torch shows wrong, and correct look-alikes of the same shape that run; the checker
reports the first and stays silent on the second."""
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

INPLACE = (RuntimeError, "modified by an inplace operation")

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT603, mechanism A: a method of a module class other than `forward`, run by the training
    # code (called per level from a script), writes in place into the result of a layer that
    # saved it. Look-alike: the out-of-place sum
    "method-per-level-script-loop": (Shape("""
        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.ReLU())
                self.cls = nn.Conv2d(4, 2, 1)
            def forward_single(self, x):
                feat = self.body(x)
                feat = feat + x
                return self.cls(feat)
        head = Head()
        loss = 0
        for f in [torch.randn(1, 4, 8, 8), torch.randn(1, 4, 4, 4)]:
            loss = loss + head.forward_single(f).mean()
        loss.backward()
        """, "GT603"), Shape("""
        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.ReLU())
                self.cls = nn.Conv2d(4, 2, 1)
            def forward_single(self, x):
                feat = self.body(x)
                feat += x
                return self.cls(feat)
        head = Head()
        loss = 0
        for f in [torch.randn(1, 4, 8, 8), torch.randn(1, 4, 4, 4)]:
            loss = loss + head.forward_single(f).mean()
        loss.backward()
        """, "GT603", 8, raises=INPLACE)),
    # GT602, the same in a helper method `forward` reaches through `self`, a sigmoid gate
    # scaled with `mul_`. Look-alike: `mul` out of place
    "helper-method-of-forward": (Shape("""
        class Gated(nn.Module):
            def __init__(self):
                super().__init__()
                self.gate = nn.Sequential(nn.Linear(4, 4), nn.Sigmoid())
            def _gated(self, x):
                g = self.gate(x)
                g = g.mul(2.0)
                return g * x
            def forward(self, x):
                return self._gated(x).sum(-1)
        Gated()(torch.randn(3, 4)).mean().backward()
        """, "GT602"), Shape("""
        class Gated(nn.Module):
            def __init__(self):
                super().__init__()
                self.gate = nn.Sequential(nn.Linear(4, 4), nn.Sigmoid())
            def _gated(self, x):
                g = self.gate(x)
                g.mul_(2.0)
                return g * x
            def forward(self, x):
                return self._gated(x).sum(-1)
        Gated()(torch.randn(3, 4)).mean().backward()
        """, "GT602", 7, raises=INPLACE)),
    # GT602, a trainer class runs `self.model.encode(x)` and backpropagates; `encode` masks
    # a tanh block's output by index. Look-alike: `encode` only called under no_grad
    # (feature extraction: nothing was saved)
    "encode-method-from-trainer-class": (Shape("""
        class AE(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
                self.dec = nn.Linear(4, 4)
            def encode(self, x):
                h = self.enc(x)
                h[:, 0] = 0.0
                return h
            def forward(self, x):
                return self.dec(x)
        class Trainer:
            def __init__(self):
                self.model = AE()
            def features(self, x):
                with torch.no_grad():
                    return self.model.encode(x)
        feats = Trainer().features(torch.randn(3, 4))
        """, "GT602"), Shape("""
        class AE(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
                self.dec = nn.Linear(4, 4)
            def encode(self, x):
                h = self.enc(x)
                h[:, 0] = 0.0
                return h
            def forward(self, x):
                return self.dec(x)
        class Trainer:
            def __init__(self):
                self.model = AE()
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
            def step(self, x):
                loss = self.model.encode(x).pow(2).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
        Trainer().step(torch.randn(3, 4))
        """, "GT602", 8, raises=INPLACE)),
    # GT603, a Lightning module's training_step runs `self.embed(batch)`, which adds in place
    # to a ReLU block's output. Look-alike: the out-of-place add
    "lightning-training-step-helper": (Shape("""
        import lightning.pytorch as pl
        class Lit(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.block = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
                self.head = nn.Linear(4, 1)
            def embed(self, x):
                h = self.block(x)
                h = h + 1.0
                return h
            def training_step(self, batch, batch_idx):
                return self.head(self.embed(batch)).pow(2).mean()
        Lit().training_step(torch.randn(3, 4), 0).backward()
        """, "GT603"), Shape("""
        import lightning.pytorch as pl
        class Lit(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.block = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
                self.head = nn.Linear(4, 1)
            def embed(self, x):
                h = self.block(x)
                h += 1.0
                return h
            def training_step(self, batch, batch_idx):
                return self.head(self.embed(batch)).pow(2).mean()
        Lit().training_step(torch.randn(3, 4), 0).backward()
        """, "GT603", 9, raises=INPLACE)),
    # GT602, `forward` hands a per-level method to `map` (mmdet's multi_apply), which applies
    # an in-place ReLU to a ReLU block's output. Look-alike: the ReLU out of place
    "method-handed-to-map": (Shape("""
        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Sequential(nn.Conv2d(4, 4, 1), nn.ReLU(inplace=True))
            def forward_single(self, x):
                x = self.conv(x)
                x = F.relu(x)
                return x.mean()
            def forward(self, feats):
                return sum(map(self.forward_single, feats))
        Head()([torch.randn(1, 4, 4, 4), torch.randn(1, 4, 2, 2)]).backward()
        """, "GT602"), Shape("""
        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Sequential(nn.Conv2d(4, 4, 1), nn.ReLU(inplace=True))
            def forward_single(self, x):
                x = self.conv(x)
                x = F.relu(x, inplace=True)
                return x.mean()
            def forward(self, feats):
                return sum(map(self.forward_single, feats))
        Head()([torch.randn(1, 4, 4, 4), torch.randn(1, 4, 2, 2)]).backward()
        """, "GT602", 7, raises=INPLACE)),
    # GT607, mechanism B: an in-place activation is given the module's input while the same
    # tensor, under an alias bound before (`identity = x`), is read after: the skip adds the
    # activated input (silent). Script, pre-activation block. Look-alike: a norm layer makes a
    # new tensor before the in-place ReLU
    "preact-identity-alias-script": (Shape("""
        class PreAct(nn.Module):
            def __init__(self):
                super().__init__()
                self.bn = nn.BatchNorm2d(4)
                self.act = nn.ReLU(inplace=True)
                self.conv = nn.Conv2d(4, 4, 3, padding=1)
            def forward(self, x):
                identity = x
                out = self.act(self.bn(x))
                out = self.conv(out)
                return out + identity
        x = torch.randn(2, 4, 5, 5)
        x0 = x.clone()
        PreAct()(x).mean().backward()
        """, "GT607", holds="torch.equal(x, x0)"), Shape("""
        class PreAct(nn.Module):
            def __init__(self):
                super().__init__()
                self.act = nn.ReLU(inplace=True)
                self.conv = nn.Conv2d(4, 4, 3, padding=1)
            def forward(self, x):
                identity = x
                out = self.act(x)
                out = self.conv(out)
                return out + identity
        x = torch.randn(2, 4, 5, 5)
        x0 = x.clone()
        PreAct()(x).mean().backward()
        """, "GT607", 4, holds="not torch.equal(x, x0) and torch.equal(x, F.relu(x0))")),
    # GT607, the input's own name rebound to the activation's result, the alias kept for the
    # skip, inside a block of a Sequential a trainer class trains. Look-alike: the alias is a
    # clone
    "rebound-input-alias-in-trainer": (Shape("""
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.relu = nn.ReLU(inplace=True)
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                shortcut = x.clone()
                x = self.relu(x)
                x = self.fc(x)
                return x + shortcut
        class Trainer:
            def __init__(self):
                self.model = nn.Sequential(nn.Linear(4, 4), Block(), nn.Linear(4, 1))
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
            def step(self, x):
                self.opt.zero_grad()
                self.model(x).pow(2).mean().backward()
                self.opt.step()
        Trainer().step(torch.randn(3, 4))
        """, "GT607"), Shape("""
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.relu = nn.ReLU(inplace=True)
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                shortcut = x
                x = self.relu(x)
                x = self.fc(x)
                return x + shortcut
        x = torch.randn(3, 4)
        x0 = x.clone()
        out = Block()(x)
        """, "GT607", 4, holds="torch.equal(x, F.relu(x0)) and not torch.equal(x, x0)")),
    # GT607, another spelling: `nn.Dropout(p, True)` (positional inplace) in a block whose
    # input is read again by name after a branch; training mode zeroes the skip's entries.
    # Look-alike: the branch that drops returns at once, the other arm adds the skip
    "positional-dropout-branch": (Shape("""
        class Mix(nn.Module):
            def __init__(self, drop_first):
                super().__init__()
                self.drop_first = drop_first
                self.drop = nn.Dropout(0.5, True)
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                if self.drop_first:
                    return self.fc(self.drop(x))
                return self.fc(x) + x
        x = torch.randn(8, 4)
        x0 = x.clone()
        Mix(True)(x).sum().backward()
        """, "GT607", holds="not torch.equal(x, x0)"), Shape("""
        class Mix(nn.Module):
            def __init__(self, drop_first):
                super().__init__()
                self.drop_first = drop_first
                self.drop = nn.Dropout(0.5, True)
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                skip = x
                if self.drop_first:
                    h = self.fc(self.drop(x))
                else:
                    h = self.fc(x)
                return h + skip
        x = torch.randn(8, 4)
        x0 = x.clone()
        Mix(True)(x)
        """, "GT607", 5, holds="(x == 0).any() and not torch.equal(x, x0)")),
    # GT607, a Lightning module: forward keeps `skip = x`, applies an in-place LeakyReLU to x,
    # training_step backpropagates. Look-alike: the LeakyReLU out of place
    "lightning-leaky-relu-skip": (Shape("""
        import lightning.pytorch as pl
        class Lit(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.act = nn.LeakyReLU(0.2)
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                skip = x
                x = self.act(x)
                return self.fc(x) + skip
            def training_step(self, batch, batch_idx):
                return self(batch).pow(2).mean()
        x = torch.randn(3, 4)
        x0 = x.clone()
        Lit().training_step(x, 0).backward()
        """, "GT607", holds="torch.equal(x, x0)"), Shape("""
        import lightning.pytorch as pl
        class Lit(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.act = nn.LeakyReLU(0.2, inplace=True)
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                skip = x
                x = self.act(x)
                return self.fc(x) + skip
            def training_step(self, batch, batch_idx):
                return self(batch).pow(2).mean()
        x = torch.randn(3, 4)
        x0 = x.clone()
        Lit().training_step(x, 0).backward()
        """, "GT607", 5, holds="not torch.equal(x, x0)")),
    # GT605, mechanism C: an in-place layer (`inplace=True`) is given a tensor that an
    # earlier layer call of the same block saved as its input (a linear/conv/norm needs it for
    # its weight gradient): backward raises. Script; look-alike: the skip reads a Dropout of
    # x, which saves its mask, not x
    "inplace-relu-after-skip-linear-script": (Shape("""
        class Unit(nn.Module):
            def __init__(self):
                super().__init__()
                self.skip = nn.Dropout(0.1)
                self.act = nn.ReLU(inplace=True)
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                s = self.skip(x)
                x = self.act(x)
                return self.fc(x) + s
        Unit()(torch.randn(3, 4)).pow(2).mean().backward()
        """, "GT605"), Shape("""
        class Unit(nn.Module):
            def __init__(self):
                super().__init__()
                self.skip = nn.Linear(4, 4)
                self.act = nn.ReLU(inplace=True)
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                s = self.skip(x)
                x = self.act(x)
                return self.fc(x) + s
        Unit()(torch.randn(3, 4)).pow(2).mean().backward()
        """, "GT605", 9, raises=INPLACE)),
    # GT605, a LayerNorm reads x, then an in-place Dropout (positional `True`) drops x itself,
    # in a block a trainer class trains. Look-alike: the dropout comes first
    "inplace-dropout-after-norm-trainer": (Shape("""
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = nn.LayerNorm(4)
                self.drop = nn.Dropout(0.5, True)
            def forward(self, x):
                x = self.drop(x)
                h = self.norm(x)
                return h + x
        class Trainer:
            def __init__(self):
                self.model = nn.Sequential(nn.Linear(4, 4), Block())
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
            def step(self, x):
                self.opt.zero_grad()
                self.model(x).pow(2).mean().backward()
                self.opt.step()
        Trainer().step(torch.randn(3, 4))
        """, "GT605"), Shape("""
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = nn.LayerNorm(4)
                self.drop = nn.Dropout(0.5, True)
            def forward(self, x):
                h = self.norm(x)
                x = self.drop(x)
                return h + x
        class Trainer:
            def __init__(self):
                self.model = nn.Sequential(nn.Linear(4, 4), Block())
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
            def step(self, x):
                self.opt.zero_grad()
                self.model(x).pow(2).mean().backward()
                self.opt.step()
        Trainer().step(torch.randn(3, 4))
        """, "GT605", 8, raises=INPLACE)),
    # GT605, a Lightning module's per-level helper: a conv saves x, then a block that starts
    # with an in-place ReLU is called on x. Look-alike: the block's ReLU out of place
    "inplace-block-after-conv-lightning": (Shape("""
        import lightning.pytorch as pl
        class Lit(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.side = nn.Conv2d(4, 4, 1)
                self.pre = nn.Sequential(nn.ReLU(), nn.Conv2d(4, 4, 3, padding=1))
            def level(self, x):
                side = self.side(x)
                y = self.pre(x)
                return (side + y).mean()
            def training_step(self, batch, batch_idx):
                return sum(self.level(f) for f in batch)
        Lit().training_step([torch.randn(1, 4, 4, 4)], 0).backward()
        """, "GT605"), Shape("""
        import lightning.pytorch as pl
        class Lit(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.side = nn.Conv2d(4, 4, 1)
                self.pre = nn.Sequential(nn.ReLU(inplace=True), nn.Conv2d(4, 4, 3, padding=1))
            def level(self, x):
                side = self.side(x)
                y = self.pre(x)
                return (side + y).mean()
            def training_step(self, batch, batch_idx):
                return sum(self.level(f) for f in batch)
        Lit().training_step([torch.randn(1, 4, 4, 4)], 0).backward()
        """, "GT605", 9, raises=INPLACE)),
    # GT602, mechanism D: a ModuleList built empty and filled with `append` in a loop holds
    # blocks ending in a saving op; forward writes in place into a block's result. Script;
    # look-alike: the blocks end in a Linear (nothing saves its output)
    "modulelist-appended-sigmoid-gates-script": (Shape("""
        class Gates(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.gates = nn.ModuleList()
                for _ in range(n):
                    self.gates.append(nn.Sequential(nn.Sigmoid(), nn.Linear(4, 4)))
            def forward(self, x):
                g = self.gates[0](x)
                g[:, 0] = 1.0
                return g
        Gates(2)(torch.randn(3, 4, requires_grad=True)).sum().backward()
        """, "GT602"), Shape("""
        class Gates(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.gates = nn.ModuleList()
                for _ in range(n):
                    self.gates.append(nn.Sequential(nn.Linear(4, 4), nn.Sigmoid()))
            def forward(self, x):
                g = self.gates[0](x)
                g[:, 0] = 1.0
                return g
        Gates(2)(torch.randn(3, 4)).sum().backward()
        """, "GT602", 9, raises=INPLACE)),
    # GT603, the blocks made by a helper of the file (conv + ReLU), appended to a ModuleList
    # attribute, the first block's output summed into in place, in a trainer class's step.
    # Look-alike: the helper's block ends in a BatchNorm (it saves its input, not its output)
    "modulelist-appended-helper-blocks-trainer": (Shape("""
        def conv_bn(c):
            return nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.ReLU(), nn.BatchNorm2d(c))
        class Levels(nn.Module):
            def __init__(self):
                super().__init__()
                self.levels = nn.ModuleList()
                for i in range(3):
                    self.levels.append(conv_bn(4))
            def forward(self, xs):
                out = self.levels[0](xs[0])
                for i in range(1, len(xs)):
                    out += self.levels[i](xs[i])
                return out
        class Trainer:
            def __init__(self):
                self.model = Levels()
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
            def step(self, xs):
                self.opt.zero_grad()
                self.model(xs).mean().backward()
                self.opt.step()
        Trainer().step([torch.randn(2, 4, 4, 4) for _ in range(3)])
        """, "GT603"), Shape("""
        def conv_relu(c):
            return nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.ReLU())
        class Levels(nn.Module):
            def __init__(self):
                super().__init__()
                self.levels = nn.ModuleList()
                for i in range(3):
                    self.levels.append(conv_relu(4))
            def forward(self, xs):
                out = self.levels[0](xs[0])
                for i in range(1, len(xs)):
                    out += self.levels[i](xs[i])
                return out
        class Trainer:
            def __init__(self):
                self.model = Levels()
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
            def step(self, xs):
                self.opt.zero_grad()
                self.model(xs).mean().backward()
                self.opt.step()
        Trainer().step([torch.randn(2, 4, 4, 4) for _ in range(3)])
        """, "GT603", 12, raises=INPLACE)),
    # GT603, a Lightning module whose tanh blocks are appended in __init__ and run in a loop
    # with a residual add in place. Look-alike: the add out of place
    "modulelist-appended-loop-lightning": (Shape("""
        import lightning.pytorch as pl
        class Lit(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList()
                for _ in range(2):
                    self.blocks.append(nn.Sequential(nn.Linear(4, 4), nn.ReLU()))
            def forward(self, x):
                for blk in self.blocks:
                    h = blk(x)
                    h = h + x
                    x = h
                return x
            def training_step(self, batch, batch_idx):
                return self(batch).pow(2).mean()
        Lit().training_step(torch.randn(3, 4), 0).backward()
        """, "GT603"), Shape("""
        import lightning.pytorch as pl
        class Lit(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList()
                for _ in range(2):
                    self.blocks.append(nn.Sequential(nn.Linear(4, 4), nn.ReLU()))
            def forward(self, x):
                for blk in self.blocks:
                    h = blk(x)
                    h += x
                    x = h
                return x
            def training_step(self, batch, batch_idx):
                return self(batch).pow(2).mean()
        Lit().training_step(torch.randn(3, 4), 0).backward()
        """, "GT603", 11, raises=INPLACE)),
    # GT528, mechanism E: a module stores on `self` a value computed from the attribute's
    # previous value and a layer's output (the layer need not read the attribute itself, or
    # the value passes through local names), undetached: the next call's graph runs into the
    # previous one, and the next backward reaches a freed graph. Script loop; look-alike: the
    # stored value is detached
    "state-updated-around-layer-script": (Shape("""
        class Leaky(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 3)
                self.g = torch.zeros(4, 3)
            def forward(self, x):
                self.g = torch.tanh(self.fc(x) + self.g).detach()
                return self.g + self.fc(x)
        model = Leaky()
        for _ in range(2):
            model(torch.randn(4, 3)).sum().backward()
        """, "GT528"), Shape("""
        class Leaky(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 3)
                self.g = torch.zeros(4, 3)
            def forward(self, x):
                self.g = torch.tanh(self.fc(x) + self.g)
                return self.g
        model = Leaky()
        for _ in range(2):
            model(torch.randn(4, 3)).sum().backward()
        """, "GT528", 7, raises=(RuntimeError, "backward through the graph a second time"))),
    # GT528, the state reaches the stored value through local names (gathered rows, a cell,
    # a scaling), in a trainer class's loop. Look-alike: the trainer resets the state every
    # batch
    "state-through-locals-trainer": (Shape("""
        class Prop(nn.Module):
            def __init__(self):
                super().__init__()
                self.cell = nn.GRUCell(3, 3)
                self.state = torch.zeros(5, 3)
            def forward(self, x, idx):
                h = torch.index_select(self.state, 0, idx)
                h = self.cell(x, h)
                self.state = h * 0.5
                return self.state
        class Trainer:
            def __init__(self):
                self.model = Prop()
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
            def fit(self, n):
                for _ in range(n):
                    self.model.state = torch.zeros(5, 3)
                    self.opt.zero_grad()
                    self.model(torch.randn(5, 3), torch.arange(5)).sum().backward()
                    self.opt.step()
        Trainer().fit(2)
        """, "GT528"), Shape("""
        class Prop(nn.Module):
            def __init__(self):
                super().__init__()
                self.cell = nn.GRUCell(3, 3)
                self.state = torch.zeros(5, 3)
            def forward(self, x, idx):
                h = torch.index_select(self.state, 0, idx)
                h = self.cell(x, h)
                self.state = h * 0.5
                return self.state
        class Trainer:
            def __init__(self):
                self.model = Prop()
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
            def fit(self, n):
                for _ in range(n):
                    self.opt.zero_grad()
                    self.model(torch.randn(5, 3), torch.arange(5)).sum().backward()
                    self.opt.step()
        Trainer().fit(2)
        """, "GT528", 9, raises=(RuntimeError, "backward through the graph a second time"))),
    # GT528, a Lightning module's membrane potential: `m = decay * self.mem + self.proj(x)`,
    # stored back. Look-alike: stored detached
    "membrane-potential-lightning": (Shape("""
        import lightning.pytorch as pl
        class Spiking(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(3, 3)
                self.mem = torch.zeros(2, 3)
            def forward(self, x):
                m = 0.9 * self.mem + self.proj(x)
                self.mem = m.detach()
                return torch.sigmoid(m)
            def training_step(self, batch, batch_idx):
                return self(batch).mean()
        lit = Spiking()
        for i in range(2):
            lit.training_step(torch.randn(2, 3), i).backward()
        """, "GT528"), Shape("""
        import lightning.pytorch as pl
        class Spiking(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(3, 3)
                self.mem = torch.zeros(2, 3)
            def forward(self, x):
                m = 0.9 * self.mem + self.proj(x)
                self.mem = m
                return torch.sigmoid(m)
            def training_step(self, batch, batch_idx):
                return self(batch).mean()
        lit = Spiking()
        for i in range(2):
            lit.training_step(torch.randn(2, 3), i).backward()
        """, "GT528", 9, raises=(RuntimeError, "backward through the graph a second time"))),
    # GT528, the state's first value made lazily under `if self.h is None:` is no reset: the
    # other arm feeds the state back into the cell, epoch after epoch. Look-alike: the
    # training loop sets `model.h = None` before every batch
    "lazy-first-state-is-no-reset": (Shape("""
        class Evolving(nn.Module):
            def __init__(self):
                super().__init__()
                self.cell = nn.GRUCell(3, 3)
                self.init = nn.Parameter(torch.randn(2, 3))
                self.h = None
            def forward(self, x):
                if self.h is None:
                    self.h = self.cell(self.init, self.init)
                else:
                    self.h = self.cell(self.h, self.h)
                return x @ self.h.t()
        model = Evolving()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(2):
            model.h = None
            opt.zero_grad()
            model(torch.randn(4, 3)).pow(2).mean().backward()
            opt.step()
        """, "GT528"), Shape("""
        class Evolving(nn.Module):
            def __init__(self):
                super().__init__()
                self.cell = nn.GRUCell(3, 3)
                self.init = nn.Parameter(torch.randn(2, 3))
                self.h = None
            def forward(self, x):
                if self.h is None:
                    self.h = self.cell(self.init, self.init)
                else:
                    self.h = self.cell(self.h, self.h)
                return x @ self.h.t()
        model = Evolving()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            model(torch.randn(4, 3)).pow(2).mean().backward()
            opt.step()
        """, "GT528", 11, raises=(RuntimeError, "backward through the graph a second time"))),
    # GT603, a ModuleList appended in a loop with one kind of block (conv + ReLU), walked in
    # forward with a masking write after each block. Look-alike: the list mixes convs and a
    # ReLU and only a conv's output is masked (the gate corpus's subsampling stack)
    "modulelist-appended-mixed-layers-masked": (Shape("""
        class Sub(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList()
                for _ in range(2):
                    self.layers.append(nn.Conv2d(2, 2, 3, padding=1))
                    self.layers.append(nn.ReLU())
            def forward(self, x, mask):
                for layer in self.layers:
                    x = layer(x)
                    if isinstance(layer, nn.Conv2d):
                        x *= mask
                return x
        Sub()(torch.randn(1, 2, 4, 4), torch.ones(1, 1, 4, 1)).sum().backward()
        """, "GT603"), Shape("""
        class Sub(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList()
                for _ in range(2):
                    self.layers.append(nn.Sequential(nn.Conv2d(2, 2, 3, padding=1), nn.ReLU()))
            def forward(self, x, mask):
                for layer in self.layers:
                    x = layer(x)
                    x *= mask
                return x
        Sub()(torch.randn(1, 2, 4, 4), torch.ones(1, 1, 4, 1)).sum().backward()
        """, "GT603", 10, raises=INPLACE)),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
