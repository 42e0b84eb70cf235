"""What a module call returns (NOTE [module results]) in the in-place rules: for each spelling
of "the block's result is an output autograd saved" a buggy twin that fires on its ``# BUG``
line and, run on real torch, raises the in-place error; and a silent look-alike that runs."""
from __future__ import annotations

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

MODIFIED = "modified by an inplace operation"

# name -> (code expected on the line marked `# BUG`, or None for a look-alike; source)
CASES = {
    "star-layers-bug": ('GT603', """
import torch
from torch import nn

class Body(nn.Module):
    def __init__(self, c, depth):
        super().__init__()
        layers = [nn.Linear(c, c)]
        for _ in range(depth):
            layers.append(nn.Linear(c, c))
            layers.append(nn.ReLU())
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        h = self.body(x)
        h += x  # BUG
        return h

net = Body(4, 2)
net(torch.randn(3, 4)).sum().backward()
"""),
    "star-layers-ok": (None, """
import torch
from torch import nn

class Body(nn.Module):
    def __init__(self, c, depth):
        super().__init__()
        layers = [nn.Linear(c, c)]
        for _ in range(depth):
            layers.append(nn.ReLU())
            layers.append(nn.Linear(c, c))
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        h = self.body(x)
        h += x
        return h

net = Body(4, 2)
net(torch.randn(3, 4)).sum().backward()
"""),
    "nested-sequential-bug": ('GT603', """
import torch
from torch import nn

class Stem(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.proj = nn.Linear(c, c)
        self.head = nn.Sequential(nn.Linear(c, c), nn.Sequential(nn.LayerNorm(c), nn.ReLU()))

    def forward(self, x):
        h = self.head(x)
        h += self.proj(x)  # BUG
        return h

Stem(4)(torch.randn(3, 4)).sum().backward()
"""),
    "nested-sequential-ok": (None, """
import torch
from torch import nn

class Stem(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.proj = nn.Linear(c, c)
        self.head = nn.Sequential(nn.Linear(c, c), nn.Sequential(nn.LayerNorm(c), nn.ELU()))

    def forward(self, x):
        h = self.head(x)
        h += self.proj(x)
        return h

Stem(4)(torch.randn(3, 4)).sum().backward()
"""),
    "modulelist-loop-bug": ('GT603', """
import torch
from torch import nn
import torch.nn.functional as F

class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.fc = nn.Linear(c, c)

    def forward(self, x):
        return F.relu(self.fc(x))

class Tower(nn.Module):
    def __init__(self, c, n):
        super().__init__()
        self.blocks = nn.ModuleList([Block(c) for _ in range(n)])
        self.skip = nn.Linear(c, c)

    def forward(self, x):
        h = x
        for blk in self.blocks:
            h = blk(h)
        h += self.skip(x)  # BUG
        return h

Tower(4, 2)(torch.randn(3, 4)).sum().backward()
"""),
    "modulelist-loop-ok": (None, """
import torch
from torch import nn
import torch.nn.functional as F

class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.fc = nn.Linear(c, c)

    def forward(self, x):
        return F.relu(self.fc(x))

class Tower(nn.Module):
    def __init__(self, c, n):
        super().__init__()
        self.blocks = nn.ModuleList([Block(c) for _ in range(n)])
        self.skip = nn.Linear(c, c)

    def forward(self, x):
        h = x
        for blk in self.blocks:
            h = blk(h)
        h = h + self.skip(x)
        return h

Tower(4, 2)(torch.randn(3, 4)).sum().backward()
"""),
    "modulelist-index-bug": ('GT602', """
import torch
from torch import nn

class Heads(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads = nn.ModuleList([nn.Sequential(nn.Linear(c, c), nn.Tanh()),
                                    nn.Sequential(nn.Linear(c, c), nn.Tanh())])

    def forward(self, x, k):
        g = self.heads[k](x)
        g[:, 0] = 0.0  # BUG
        return g

Heads(4)(torch.randn(3, 4), 1).sum().backward()
"""),
    "modulelist-index-ok": (None, """
import torch
from torch import nn

class Heads(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads = nn.ModuleList([nn.Sequential(nn.Tanh(), nn.Linear(c, c)),
                                    nn.Sequential(nn.Tanh(), nn.Linear(c, c))])

    def forward(self, x, k):
        g = self.heads[k](x)
        g[:, 0] = 0.0
        return g

Heads(4)(torch.randn(3, 4), 1).sum().backward()
"""),
    "dunder-call-block-bug": ('GT603', """
import torch
from torch import nn

class Gate:
    pass

class Act(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.ReLU()

    def __call__(self, x):
        return self.act(x)

class Net(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.fc, self.a = nn.Linear(c, c), Act()

    def forward(self, x):
        h = self.a(self.fc(x))
        h += x  # BUG
        return h

Net(4)(torch.randn(3, 4)).sum().backward()
"""),
    "dunder-call-block-ok": (None, """
import torch
from torch import nn

class Gate:
    pass

class Act(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.LeakyReLU(0.1)

    def __call__(self, x):
        return self.act(x)

class Net(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.fc, self.a = nn.Linear(c, c), Act()

    def forward(self, x):
        h = self.a(self.fc(x))
        h += x
        return h

Net(4)(torch.randn(3, 4)).sum().backward()
"""),
    "dunder-call-write-bug": ('GT602', """
import torch
from torch import nn

class Mask(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.score = nn.Linear(c, 1)
        self.squash = nn.Sigmoid()

    def __call__(self, x):
        a = self.score(x)
        a = self.squash(a)
        a[0] = 0.0  # BUG
        return x * a

Mask(4)(torch.randn(3, 4)).sum().backward()
"""),
    "dunder-call-write-ok": (None, """
import torch
from torch import nn

class Mask(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.score = nn.Linear(c, 1)
        self.squash = nn.Sigmoid()

    def __call__(self, x):
        a = self.score(x)
        a = self.squash(a).clone()
        a[0] = 0.0
        return x * a

Mask(4)(torch.randn(3, 4)).sum().backward()
"""),
    "flag-keyword-bug": ('GT603', """
import torch
from torch import nn
import torch.nn.functional as F

class ConvBN(nn.Module):
    def __init__(self, c, activation='relu'):
        super().__init__()
        self.activation = activation
        self.fc = nn.Linear(c, c)

    def forward(self, x):
        x = self.fc(x)
        if self.activation == 'relu':
            return F.relu(x)
        else:
            return x

class Path(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.short = ConvBN(c, activation=None)
        self.main = ConvBN(c, activation='relu')

    def forward(self, x):
        s = self.short(x)
        x = self.main(x)
        x += s  # BUG
        return x

Path(4)(torch.randn(3, 4)).sum().backward()
"""),
    "flag-default-bug": ('GT602', """
import torch
from torch import nn
import torch.nn.functional as F

class ConvBN(nn.Module):
    def __init__(self, c, act=True):
        super().__init__()
        self.act = act
        self.fc = nn.Linear(c, c)

    def forward(self, x):
        x = self.fc(x)
        if not self.act:
            return x
        return torch.sigmoid(x)

class Path(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.short = ConvBN(c, False)
        self.main = ConvBN(c)

    def forward(self, x):
        s = self.short(x)
        x = self.main(x)
        x *= s  # BUG
        return x

Path(4)(torch.randn(3, 4)).sum().backward()
"""),
    "flag-ok": (None, """
import torch
from torch import nn
import torch.nn.functional as F

class ConvBN(nn.Module):
    def __init__(self, c, activation='relu'):
        super().__init__()
        self.activation = activation
        self.fc = nn.Linear(c, c)

    def forward(self, x):
        x = self.fc(x)
        if self.activation == 'relu':
            return F.relu(x)
        else:
            return x

class Path(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.short = ConvBN(c, activation='relu')
        self.main = ConvBN(c, activation='none')

    def forward(self, x):
        s = self.short(x)
        x = self.main(x)
        x += s
        return x

Path(4)(torch.randn(3, 4)).sum().backward()
"""),
    "passthrough-bug": ('GT603', """
import torch
from torch import nn

class Trim(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.n = n

    def forward(self, x):
        if self.n > 0:
            x = x[:, : -self.n]
        return x

class Net(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.fc, self.act, self.trim = nn.Linear(c, c), nn.ReLU(), Trim(1)

    def forward(self, x):
        h = self.trim(self.act(self.fc(x)))
        h += 1.0  # BUG
        return h

Net(4)(torch.randn(3, 4)).sum().backward()
"""),
    "passthrough-ok": (None, """
import torch
from torch import nn

class Trim(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.n = n

    def forward(self, x):
        if self.n > 0:
            x = x[:, : -self.n]
        return x

class Net(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.fc, self.act, self.trim = nn.Linear(c, c), nn.ReLU(), Trim(1)

    def forward(self, x):
        h = self.trim(self.fc(self.act(x)))
        h += 1.0
        return h

Net(4)(torch.randn(3, 4)).sum().backward()
"""),
    "helper-bug": ('GT603', """
import torch
from torch import nn


def fc_block(c):
    return nn.Sequential(nn.Linear(c, c), nn.ReLU(inplace=False))


class Net(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.block = fc_block(c)
        self.skip = nn.Linear(c, c)

    def forward(self, x):
        h = self.block(x)
        h -= self.skip(x)  # BUG
        return h

Net(4)(torch.randn(3, 4)).sum().backward()
"""),
    "helper-ok": (None, """
import torch
from torch import nn


def fc_block(c):
    return nn.Sequential(nn.Linear(c, c), nn.ReLU(inplace=False), nn.LayerNorm(c))


class Net(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.block = fc_block(c)
        self.skip = nn.Linear(c, c)

    def forward(self, x):
        h = self.block(x)
        h -= self.skip(x)
        return h

Net(4)(torch.randn(3, 4)).sum().backward()
"""),
    "saved-input-view-bug": ('GT605', """
import torch
from torch import nn

class Mixer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.inp = nn.Linear(c, c)
        self.mix = nn.Sequential(nn.Conv1d(4, 4, 1), nn.GELU())

    def forward(self, z):
        x = self.inp(z)
        y = self.mix(x.transpose(1, 2))
        x += y.transpose(1, 2)  # BUG
        return x

Mixer(4)(torch.randn(3, 4, 4)).sum().backward()
"""),
    "saved-input-view-ok": (None, """
import torch
from torch import nn

class Mixer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.inp = nn.Linear(c, c)
        self.mix = nn.Sequential(nn.Conv1d(4, 4, 1), nn.GELU())

    def forward(self, z):
        x = self.inp(z)
        y = self.mix(x.transpose(1, 2).clone())
        x += y.transpose(1, 2)
        return x

Mixer(4)(torch.randn(3, 4, 4)).sum().backward()
"""),
    "saved-input-list-element-ok": (None, """
import torch
from torch import nn


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_s0 = nn.Conv2d(4, 4, 1)
        self.conv_s1 = nn.Conv2d(4, 4, 1)

    def forward(self, feats):
        feature_maps = list(feats)
        feature_maps[0] = self.conv_s0(feature_maps[0])
        feature_maps[1] = self.conv_s1(feature_maps[1])
        return feature_maps[0].sum() + feature_maps[1].sum()


feats = (torch.randn(1, 4, 3, 3, requires_grad=True), torch.randn(1, 4, 3, 3, requires_grad=True))
Head()(feats).backward()
"""),
    "modulelist-mixed-blocks-ok": (None, """
import torch
from torch import nn

class Mixed(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(c, c), nn.Sequential(nn.Linear(c, c), nn.ReLU())])

    def forward(self, x):
        h = self.blocks[0](x)
        h += x
        return self.blocks[1](h)

Mixed(4)(torch.randn(3, 4)).sum().backward()
"""),
    "leaky-elu-out-of-place-ok": (None, """
import torch
from torch import nn
import torch.nn.functional as F

class Net(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.fc = nn.Linear(c, c)
        self.act = nn.ELU()

    def forward(self, x):
        h = self.act(self.fc(x))
        h += x
        g = F.leaky_relu(self.fc(x), 0.2)
        g += x
        return h + g

Net(4)(torch.randn(3, 4)).sum().backward()
"""),
    "leaky-in-place-bug": ("GT603", """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.fc = nn.Linear(c, c)
        self.act = nn.Sequential(nn.Linear(c, c), nn.LeakyReLU(0.2, inplace=True))

    def forward(self, x):
        h = self.act(self.fc(x))
        h += x  # BUG
        return h

Net(4)(torch.randn(3, 4)).sum().backward()
"""),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_module_result_spelling(name: str) -> None:
    code, src = CASES[name]
    want = [(code, i + 1) for i, s in enumerate(src.splitlines()) if s.endswith("# BUG")]
    got = [(f.code, f.line) for f in check_source(src, "snippet.py")
           if f.code in ("GT602", "GT603", "GT605")]
    assert got == want
    scope: dict[str, object] = {"__name__": "snippet"}
    if code is None:
        exec(compile(src, "snippet.py", "exec"), scope)  # noqa: S102 - the snippet is the test
    else:
        with pytest.raises(RuntimeError, match=MODIFIED):
            exec(compile(src, "snippet.py", "exec"), scope)  # noqa: S102


# GT758 through the same fact: a constructor flag picks the softmax return; a class whose
# `__call__` returns one. Run on torch, the twin's loss is not the cross-entropy of the logits.
NUMERICS = {
    "flag-picks-softmax": ("GT758", """
import torch
from torch import nn
import torch.nn.functional as F


class Classifier(nn.Module):
    def __init__(self, d, k, probs=False):
        super().__init__()
        self.probs = probs
        self.fc = nn.Linear(d, k)

    def forward(self, x):
        z = self.fc(x)
        if self.probs:
            return F.softmax(z, dim=-1)  # BUG
        return z


model = Classifier(4, 3, probs=True)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
loss = F.cross_entropy(model(x), y)
opt.zero_grad()
loss.backward()
opt.step()
"""),
    "flag-picks-logits-ok": (None, """
import torch
from torch import nn
import torch.nn.functional as F


class Classifier(nn.Module):
    def __init__(self, d, k, probs=False):
        super().__init__()
        self.probs = probs
        self.fc = nn.Linear(d, k)

    def forward(self, x):
        z = self.fc(x)
        if self.probs:
            return F.softmax(z, dim=-1)
        return z


model = Classifier(4, 3, probs=False)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
loss = F.cross_entropy(model(x), y)
opt.zero_grad()
loss.backward()
opt.step()
"""),
    "dunder-call-softmax": ("GT758", """
import torch
from torch import nn
import torch.nn.functional as F


class Classifier(nn.Module):
    def __init__(self, d, k):
        super().__init__()
        self.fc = nn.Linear(d, k)

    def __call__(self, x):
        return torch.softmax(self.fc(x), dim=-1)  # BUG


model = Classifier(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
loss = F.cross_entropy(model(x), y)
opt.zero_grad()
loss.backward()
opt.step()
"""),
    "dunder-call-logits-ok": (None, """
import torch
from torch import nn
import torch.nn.functional as F


class Classifier(nn.Module):
    def __init__(self, d, k):
        super().__init__()
        self.fc = nn.Linear(d, k)

    def __call__(self, x):
        return self.fc(x)


model = Classifier(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
loss = F.cross_entropy(model(x), y)
opt.zero_grad()
loss.backward()
opt.step()
"""),
}


@pytest.mark.parametrize("name", sorted(NUMERICS))
def test_module_result_numerics(name: str) -> None:
    code, src = NUMERICS[name]
    want = [(code, i + 1) for i, s in enumerate(src.splitlines()) if s.endswith("# BUG")]
    got = [(f.code, f.line) for f in check_source(src, "snippet.py") if f.code == "GT758"]
    assert got == want
    scope: dict[str, object] = {"__name__": "snippet"}
    exec(compile(src, "snippet.py", "exec"), scope)  # noqa: S102 - the snippet is the test
    model, x, y = scope["model"], scope["x"], scope["y"]
    ce = torch.nn.functional.cross_entropy
    with torch.no_grad():
        same = torch.isclose(ce(model(x), y), ce(model.fc(x), y)).item()  # type: ignore
    assert same is (code is None)


# GT115 through the same `forward_of`: a class whose `__call__` (not `forward`) cuts a submodule.
CUTS = {
    "dunder-call-cut": ("GT115", """
import torch
import torch.nn as nn


class Probe(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(8, 8)
        self.head = nn.Linear(8, 2)

    def __call__(self, x):
        h = self.enc(x).detach()  # BUG
        return self.head(h)


model = Probe()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(4, 8), torch.randn(4, 2)
loss = ((model(x) - y) ** 2).mean()
opt.zero_grad()
loss.backward()
opt.step()
"""),
    "dunder-call-no-cut-ok": (None, """
import torch
import torch.nn as nn


class Probe(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(8, 8)
        self.head = nn.Linear(8, 2)

    def __call__(self, x):
        h = self.enc(x)
        return self.head(h)


model = Probe()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(4, 8), torch.randn(4, 2)
loss = ((model(x) - y) ** 2).mean()
opt.zero_grad()
loss.backward()
opt.step()
"""),
}


@pytest.mark.parametrize("name", sorted(CUTS))
def test_module_result_cut(name: str) -> None:
    code, src = CUTS[name]
    want = [(code, i + 1) for i, s in enumerate(src.splitlines()) if s.endswith("# BUG")]
    got = [(f.code, f.line) for f in check_source(src, "snippet.py") if f.code == "GT115"]
    assert got == want
    scope: dict[str, object] = {"__name__": "snippet"}
    exec(compile(src, "snippet.py", "exec"), scope)  # noqa: S102 - the snippet is the test
    assert (scope["model"].enc.weight.grad is None) is (code is not None)  # type: ignore
