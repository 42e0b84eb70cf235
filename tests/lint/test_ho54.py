"""Session 54, helper ho54: general facts behind held-out batch 48's misses. Each shape: a
buggy twin with its code and line, and silent look-alikes, in another style than the case."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")


def _found(src: str, code: str) -> list[int]:
    return sorted(f.line for f in check_source(textwrap.dedent(src)) if f.code == code)


# GT766 widened: a per-group sum of squares (`zeros.scatter_add_(0, idx, x * x)`, here in a
# functional graph norm, and a helper of the file returning one) divided by the group sizes,
# its root indexed back to the nodes before `+ eps` (pyg#2559 style; checked on torch 2.13: the
# group of one node has variance 0 and NaN gradient)
GRAPH_NORM = '''
import torch
from torch import nn

def group_sum(values, group, n):
    return torch.zeros(n, values.shape[1]).scatter_add_(0, group[:, None].expand_as(values), values)

def graph_norm(h, group, n, eps=1e-6):
    size = torch.bincount(group, minlength=n).clamp(min=1)[:, None]
    centred = h - (group_sum(h, group, n) / size)[group]
    spread = {spread}
    return centred / {root}

class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, h, group, n):
        return graph_norm(self.lin(h), group, n).sum(0)

model = Classifier()
model(torch.randn(5, 3), torch.tensor([0, 0, 1, 1, 2]), 3).sum().backward()
'''


@pytest.mark.parametrize("spread, root, expected", [
    ("group_sum(centred ** 2, group, n) / size", "(spread.sqrt()[group] + eps)", [12]),
    ("torch.zeros(n, 3).index_add_(0, group, centred.pow(2))", "(spread.sqrt() + eps)[group]",
     [12]),
    ("torch.zeros(n, 3).index_add_(0, group, centred.pow(2)) / size",
     "(spread.sqrt()[group] + eps)", [12]),
    ("group_sum(centred ** 2, group, n) / size", "(spread + eps).sqrt()[group]", []),
    ("torch.ones(n, 3).index_add_(0, group, centred.pow(2))", "(spread.sqrt()[group] + eps)",
     []),  # summed into ones: never 0
    ("group_sum(centred.abs(), group, n) / size", "(spread.sqrt()[group] + eps)", []),
])
def test_root_of_grouped_squares(spread, root, expected):
    assert _found(GRAPH_NORM.format(spread=spread, root=root), "GT766") == expected


# GT421 through a function handed the classes (NOTE [class handed in], NOTE [optimizer class
# given]) and an identity helper (`def on_device(m): return m`): l2l#2 style, checked on torch
# 2.13 (`ValueError: optimizer got an empty parameter list`)
HANDED = '''
import torch
from torch import nn

def on_device(m):
    return m

class FastWeights(nn.Module):
    def __init__(self, n=4):
        super().__init__()
        self.register_buffer("theta", torch.zeros(n).requires_grad_())

    def forward(self, x):
        return (x @ self.theta).pow(2).mean()

class Slow(nn.Module):
    def __init__(self, n=4):
        super().__init__()
        self.lin = nn.Linear(n, 1)

    def forward(self, x):
        return self.lin(x).pow(2).mean()

def benchmark(model_cls, optimizer_cls, steps, **extra):
    net = on_device(model_cls())
    opt = optimizer_cls({given}, lr=0.1, **extra)
    for _ in range(steps):
        opt.zero_grad()
        net(torch.randn(8, 4)).backward()
        opt.step()

{calls}
'''


@pytest.mark.parametrize("given, calls, expected", [
    ("net.parameters()", "benchmark(FastWeights, torch.optim.SGD, 3, momentum=0.9)", [26]),
    ("net.parameters()", "for o in (torch.optim.SGD, torch.optim.Adam):\n"
                         "    benchmark(FastWeights, o, 3)", [26]),
    ("[net.theta]", "benchmark(FastWeights, torch.optim.SGD, 3)", []),  # the buffer itself
    ("net.parameters()", "benchmark(Slow, torch.optim.SGD, 3)", []),    # real parameters
    ("net.parameters()", "benchmark(Slow, torch.optim.SGD, 3)\n"
                         "benchmark(FastWeights, torch.optim.SGD, 3)", []),  # two classes
])
def test_optimizer_over_buffers_of_a_handed_class(given, calls, expected):
    src = HANDED.format(given=given, calls=calls)
    assert _found(src, "GT421") == expected
    if expected:
        with pytest.raises(ValueError, match="empty parameter list"):
            exec(compile(textwrap.dedent(src), "<handed>", "exec"), {})


# GT602 at the flag: an `nn.Sequential` built in `__init__` that opens with an in-place layer,
# called on an output saved for backward, is reported at that layer's constructor, the use as
# related (RPNet#6 style; checked on torch 2.13: the backward raises)
OPENED = '''
import torch
from torch import nn

class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(4, 4), nn.Sigmoid())
        self.head = nn.Sequential(
            {first},
            nn.Linear(4, 1))

    def forward(self, x):
        h = self.enc(x)
        return self.head(h)

model = Gate()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    opt.zero_grad()
    model(torch.randn(3, 4)).sum().backward()
    opt.step()
'''


@pytest.mark.parametrize("first, expected", [
    ("nn.ELU(alpha=1.0, inplace=True)", [10]),
    ("nn.Hardtanh(-0.5, 0.5, True)", [10]),
    ("nn.ELU(alpha=1.0)", []),
    ("nn.Identity()", []),
])
def test_inplace_layer_opening_a_sequential(first, expected):
    src = OPENED.format(first=first)
    got = [f for f in check_source(textwrap.dedent(src)) if f.code == "GT602"]
    assert [f.line for f in got] == expected
    if expected:
        assert [r.line for r in got[0].related][:1] == [15]
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            exec(compile(textwrap.dedent(src), "<opened>", "exec"), {})
    else:
        exec(compile(textwrap.dedent(src), "<opened>", "exec"), {})


# GT490: an `nn.Parameter` handed to a constructor that registers the argument as a buffer
# (cheetah#302 style; checked on torch 2.13: the value is not in `parameters()` and its
# optimizer never moves it)
SCALED = '''
import torch
from torch import nn

class Shift(nn.Module):
    def __init__(self, width, *, offset):
        super().__init__()
        self.lin = nn.Linear(width, width)
        {register}

    def forward(self, x):
        return self.lin(x) + self.offset

offset = {value}
block = Shift(3, offset=offset)
opt = torch.optim.Adam(block.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    block(torch.randn(4, 3)).pow(2).mean().backward()
    opt.step()
'''


@pytest.mark.parametrize("register, value, expected", [
    ('self.register_buffer("offset", offset.to(torch.float32))',
     "nn.Parameter(torch.ones(3))", [9]),
    ('self.register_buffer("offset", offset)', "nn.Parameter(torch.ones(3))", [9]),
    ('self.register_buffer("offset", offset)', "torch.ones(3)", []),    # a constant, meant so
    ('self.offset = offset', "nn.Parameter(torch.ones(3))", []),        # registered by setattr
    ('self.register_buffer("offset", offset.clone())',                  # a copy: GT490 is about
     "nn.Parameter(torch.ones(3))", []),                                # the object itself
])
def test_parameter_registered_as_buffer(register, value, expected):
    src = SCALED.format(register=register, value=value)
    assert _found(src, "GT490") == expected
    scope: dict = {}
    exec(compile(textwrap.dedent(src), "<scaled>", "exec"), scope)
    trained = any(p is scope["offset"] for p in scope["block"].parameters())
    assert trained == (value.startswith("nn.") and not expected and "clone" not in register)


# GT568: a backward per loss term, each term's gradient read from `.grad` in the same pass,
# nothing clearing it (PINA#718 style; checked on torch 2.13: the second read is the sum)
TERMS = '''
import torch
from torch import nn

net = nn.Linear(3, 1)
params = list(net.parameters())
x = torch.randn(8, 3)
terms = {{"fit": net(x).pow(2).mean(), "smooth": net(x).abs().mean()}}
grads = {{}}
for name, term in terms.items():
    {body}
{after}
'''


@pytest.mark.parametrize("body, after, expected", [
    ("term.backward(retain_graph=True)\n"
     "    grads[name] = torch.cat([p.grad.flatten() for p in params])", "", [11]),
    ("term.backward(retain_graph=True)\n"
     "    grads[name] = torch.cat([p.grad.flatten() for p in params])\n"
     "    net.zero_grad()", "", []),                                   # cleared every pass
    ("g = torch.autograd.grad(term, params, retain_graph=True)\n"
     "    grads[name] = torch.cat([v.flatten() for v in g])", "", []),  # .grad untouched
    ("term.backward(retain_graph=True)\n"
     "    grads[name] = []\n"
     "    for p in net.parameters():\n"
     "        grads[name].append(p.grad.norm())", "", [11]),
    ("term.backward(retain_graph=True)",
     "total = torch.cat([p.grad.flatten() for p in params])", []),   # the sum, read once
    ("term.backward(retain_graph=True)\n"
     "    print(name, [p.grad.norm() for p in params])", "", []),     # only shown
    ("term.backward(retain_graph=True)\n"
     "    assert all(p.grad.norm() > 0 for p in params)", "", []),    # only checked
    ("x = torch.randn(8, 3, requires_grad=True)\n"                   # a leaf made each pass
     "    out = net(x).sum()\n"
     "    out.backward()\n"
     "    grads[name] = x.grad.norm()", "", []),
])
def test_per_pass_grads_accumulated(body, after, expected):
    src = TERMS.format(body=body, after=after)
    assert _found(src, "GT568") == expected
    if expected:
        scope: dict = {}
        exec(compile(textwrap.dedent(src), "<terms>", "exec"), scope)
        own = torch.autograd.grad(scope["terms"]["smooth"], scope["params"])
        got = scope["grads"]["smooth"]
        got = torch.stack(got) if isinstance(got, list) else got
        assert not torch.allclose(got, torch.cat([g.flatten() for g in own])
                                  if got.dim() == 1 and got.numel() == 4
                                  else torch.stack([g.norm() for g in own]))

