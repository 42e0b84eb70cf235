"""Readings of docs/triage/static26c.md, each in spellings the real-world cases do not use, as a
buggy twin that real torch fails on and a correct look-alike that runs; the checker reports the
first and stays silent on the second."""
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

MULTI = (RuntimeError, "returns multiple views")
NOT_NEEDED = (RuntimeError, "DistributedDataParallel is not needed")
MODIFIED = (RuntimeError, "modified by an inplace operation")

HEADS = '''
def to_heads(t, n):
    b, l, c = t.shape
    return t.view(b, l, n, c // n).transpose(1, 2)
def copied_heads(t, n):
    b, l, c = t.shape
    return t.reshape(b, l, n, c // n).clone()
class Mixer(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 16)
    def forward(self, x):
        a, g = self.proj(x).chunk(2, dim=-1)
        a = HELPER(a, 2)
        a.mul_(0.5)
        return (a.transpose(1, 2).reshape(x.shape) * g).sum()
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT608 through a helper of the file whose return is a view of its parameter (heads made
    # from a chunk piece). Look-alike: the helper returns a copy
    "helper-returns-view-of-chunk-piece": (
        Shape(HEADS.replace("HELPER", "copied_heads") + '''
Mixer()(torch.randn(2, 3, 8)).backward()
''', "GT608"),
        Shape(HEADS.replace("HELPER", "to_heads") + '''
Mixer()(torch.randn(2, 3, 8)).backward()
''', "GT608", 14, raises=MULTI)),
    # GT608 through `torch.flatten` of a split piece (a view: the piece is contiguous), the
    # split tensor made by `torch.bmm` of a layer's output. Look-alike: the piece is cloned
    "flatten-of-split-piece-masked": (Shape('''
def score(layer, x, y):
    h = torch.bmm(layer(x), y)
    first, rest = torch.split(h, 2, dim=0)
    flat = torch.flatten(first, 1).clone()
    flat[flat < 0] = 0
    return flat.sum() + rest.sum()
score(nn.Linear(3, 4), torch.randn(4, 5, 3), torch.randn(4, 4, 2)).backward()
''', "GT608"), Shape('''
def score(layer, x, y):
    h = torch.bmm(layer(x), y)
    first, rest = torch.split(h, 2, dim=0)
    flat = torch.flatten(first, 1)
    flat[flat < 0] = 0
    return flat.sum() + rest.sum()
score(nn.Linear(3, 4), torch.randn(4, 5, 3), torch.randn(4, 4, 2)).backward()
''', "GT608", 5, raises=MULTI)),
    # GT608: a method reshapes an unbound row into heads with `torch.reshape`, then scales it
    # in place. Look-alike: out of place
    "torch-reshape-of-unbound-row-scaled": (Shape('''
class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 12)
    def forward(self, x):
        left, right = self.fc(x).view(-1, 2, 6).unbind(1)
        left = torch.reshape(left, (-1, 2, 3))
        left = left * 2
        return left.sum() + right.sum()
Pair()(torch.randn(4, 6)).backward()
''', "GT608"), Shape('''
class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 12)
    def forward(self, x):
        left, right = self.fc(x).view(-1, 2, 6).unbind(1)
        left = torch.reshape(left, (-1, 2, 3))
        left *= 2
        return left.sum() + right.sum()
Pair()(torch.randn(4, 6)).backward()
''', "GT608", 8, raises=MULTI)),
    # GT605: a tensor written in place by a value made from an op that saved that tensor
    # (`z /= z.norm(...)`): the norm's backward needs the old `z`. Here in a module's forward;
    # look-alike: out of place
    "forward-divides-output-by-own-norm": (Shape('''
class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(5, 3)
    def forward(self, x):
        z = self.proj(x)
        z = z / z.norm(dim=-1, keepdim=True)
        return z
Embed()(torch.randn(4, 5)).sum().backward()
''', "GT605"), Shape('''
class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(5, 3)
    def forward(self, x):
        z = self.proj(x)
        z /= z.norm(dim=-1, keepdim=True)
        return z
Embed()(torch.randn(4, 5)).sum().backward()
''', "GT605", 7, raises=MODIFIED)),
    # GT605 in a helper given a layer's output: `v.div_(vector_norm(v))`. Look-alike: the
    # same helper, its only caller passes a tensor without history
    "helper-divides-argument-by-own-norm": (Shape('''
def unit(v):
    v.div_(torch.linalg.vector_norm(v, dim=1, keepdim=True))
    return v
enc = nn.Linear(4, 4)
x = torch.randn(3, 4)
loss = (enc(x) * unit(torch.randn(3, 4))).sum()
loss.backward()
''', "GT605"), Shape('''
def unit(v):
    v.div_(torch.linalg.vector_norm(v, dim=1, keepdim=True))
    return v
enc = nn.Linear(4, 4)
x = torch.randn(3, 4)
loss = unit(enc(x)).sum()
loss.backward()
''', "GT605", 2, raises=MODIFIED)),
    # GT605 on a column of a layer's output, scaled in place by its own softplus. Look-alike:
    # the factor is detached (the softplus never runs backward)
    "column-scaled-by-own-softplus": (Shape('''
class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)
    def forward(self, x):
        h = self.fc(x)
        h[:, 0] *= F.softplus(h[:, 0]).detach()
        return h.sum()
Gate()(torch.randn(5, 3)).backward()
''', "GT605"), Shape('''
class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)
    def forward(self, x):
        h = self.fc(x)
        h[:, 0] *= F.softplus(h[:, 0])
        return h.sum()
Gate()(torch.randn(5, 3)).backward()
''', "GT605", 7, raises=MODIFIED)),
    # GT613: a block starting with an in-place activation given a chunk piece, in a method
    # `forward` calls. Look-alike: the piece is cloned first
    "inplace-block-on-chunk-piece": (Shape('''
class Fuse(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 8)
        self.post = nn.Sequential(nn.LeakyReLU(0.2, True), nn.Linear(4, 4))
    def branch(self, h):
        a, b = h.chunk(2, dim=-1)
        return self.post(b.clone()) + a
    def forward(self, x):
        return self.branch(self.fc(x)).sum()
net = Fuse()
net(torch.randn(3, 4)).backward()
''', "GT613"), Shape('''
class Fuse(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 8)
        self.post = nn.Sequential(nn.LeakyReLU(0.2, True), nn.Linear(4, 4))
    def branch(self, h):
        a, b = h.chunk(2, dim=-1)
        return self.post(b) + a
    def forward(self, x):
        return self.branch(self.fc(x)).sum()
net = Fuse()
net(torch.randn(3, 4)).backward()
''', "GT613", 8, raises=MULTI)),
    # GT608 through the functional spelling `F.relu_(piece)`. Look-alike: `F.relu(piece)`
    "functional-relu-underscore-on-unbound-row": (Shape('''
def pair_score(layer, x):
    left, right = layer(x).unbind(dim=1)
    left = F.relu(left)
    return (left * right).sum()
pair_score(nn.Linear(3, 2), torch.randn(5, 3)).backward()
''', "GT608"), Shape('''
def pair_score(layer, x):
    left, right = layer(x).unbind(dim=1)
    left = F.relu_(left)
    return (left * right).sum()
pair_score(nn.Linear(3, 2), torch.randn(5, 3)).backward()
''', "GT608", 3, raises=MULTI)),
    # GT507 through a torch.distributions object built once before the loop from a tensor
    # that requires grad: Categorical normalizes its probs when built, the first backward
    # frees that graph. Look-alike: built inside the loop
    "categorical-built-once-before-loop": (Shape('''
def reinforce(scores, rewards):
    opt = torch.optim.SGD([scores], lr=0.1)
    for r in rewards:
        policy = torch.distributions.Categorical(probs=scores.softmax(-1))
        act = policy.sample()
        opt.zero_grad()
        (-r * policy.log_prob(act)).backward()
        opt.step()
reinforce(torch.zeros(3, requires_grad=True), [1.0, -1.0, 0.5])
''', "GT507"), Shape('''
probs = torch.tensor([0.2, 0.3, 0.5], requires_grad=True)
policy = torch.distributions.Categorical(probs)
opt = torch.optim.SGD([probs], lr=0.1)
for r in [1.0, -1.0, 0.5]:
    act = policy.sample()
    opt.zero_grad()
    (-r * policy.log_prob(act)).backward()
''', "GT507", 2, raises=(RuntimeError, "backward through the graph a second time"))),
    # GT507 for `Binomial(n, probs)` built once (log_prob backwarded each pass). Look-alike:
    # `Normal(mu, sigma)` built once uses its parameters as given: it runs
    "binomial-built-once-before-loop": (Shape('''
mu = torch.zeros(2, requires_grad=True)
sigma = torch.ones(2)
dist = torch.distributions.Normal(mu, sigma)
opt = torch.optim.SGD([mu], lr=0.1)
for _ in range(3):
    opt.zero_grad()
    (-dist.log_prob(torch.ones(2)).sum()).backward()
    opt.step()
''', "GT507"), Shape('''
p = torch.full((2,), 0.3, requires_grad=True)
dist = torch.distributions.Binomial(4, p)
opt = torch.optim.SGD([p], lr=0.01)
for _ in range(3):
    opt.zero_grad()
    (-dist.log_prob(torch.ones(2)).sum()).backward()
    opt.step()
''', "GT507", 2, raises=(RuntimeError, "backward through the graph a second time"))),
}

# GT456 for a module built and frozen whole before DDP wraps it: in a builder of the file (a
# method here) or in the wrapping function. Run on one gloo rank
DDP_SHAPES: dict[str, tuple[Shape, Shape]] = {
    # builder method freezes with `requires_grad_(False)` per parameter; look-alike: the
    # head stays trainable (only the body is frozen)
    "builder-method-freezes-every-parameter": (Shape('''
from torch.nn.parallel import DistributedDataParallel
class Trainer:
    def make_critic(self):
        critic = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Conv2d(4, 4, 3))
        for w in critic[0].parameters():
            w.requires_grad_(False)
        return critic
    def setup(self):
        net = self.make_critic()
        self.critic = DistributedDataParallel(net)
Trainer().setup()
''', "GT456"), Shape('''
from torch.nn.parallel import DistributedDataParallel
class Trainer:
    def make_critic(self):
        critic = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Conv2d(4, 4, 3))
        for w in critic.parameters():
            w.requires_grad_(False)
        return critic
    def setup(self):
        net = self.make_critic()
        self.critic = DistributedDataParallel(net)
Trainer().setup()
''', "GT456", 10, raises=NOT_NEEDED)),
    # frozen in the wrapping function itself; look-alike: the freeze only under a flag that
    # is off
    "frozen-in-wrapping-function": (Shape('''
from torch.nn.parallel import DistributedDataParallel as DDP
def wrap_scorer(freeze):
    scorer = nn.Linear(6, 1)
    if freeze:
        scorer.requires_grad_(False)
    return DDP(scorer)
wrap_scorer(False)
''', "GT456"), Shape('''
from torch.nn.parallel import DistributedDataParallel as DDP
def wrap_scorer():
    scorer = nn.Linear(6, 1)
    scorer.requires_grad_(False)
    return DDP(scorer)
wrap_scorer()
''', "GT456", 5, raises=NOT_NEEDED)),
}


@pytest.fixture(scope="module")
def one_rank():
    import os
    import tempfile

    import torch.distributed as dist
    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    if not dist.is_initialized():
        fd, path = tempfile.mkstemp(prefix="gt26c-store-")
        os.close(fd)
        os.unlink(path)
        dist.init_process_group("gloo", init_method=f"file://{path}", rank=0, world_size=1)
    yield
    if dist.is_initialized():
        dist.destroy_process_group()


@pytest.mark.parametrize("name", sorted(DDP_SHAPES))
def test_ddp_look_alike_is_silent_and_runs(name: str, one_rank: None) -> None:
    judge(PRELUDE, DDP_SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(DDP_SHAPES))
def test_ddp_buggy_twin_is_reported_and_fails(name: str, one_rank: None) -> None:
    judge(PRELUDE, DDP_SHAPES[name][1])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
