"""Readings of docs/triage/static27c.md, each in spellings the real-world cases do not use, as a
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

LEAF = (RuntimeError, "leaf Variable that requires grad is being used in an in-place")

HOOKED = '''
def keep_grad(mod, args, result):
    result.requires_grad_()
class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.word_emb = nn.Embedding(30, 6)
        self.head = nn.Linear(6, 1)
    def mix(self, ids, extra):
        hidden = self.word_emb(ids)
        rows = hidden.view(-1, 6)
        rows[0] = extra
        return self.head(hidden).sum()
net = nn.Module()
net.encoder = Encoder()
FREEZE
net.encoder.word_emb.register_forward_hook(keep_grad)
net.encoder.mix(torch.randint(0, 30, (2, 4)), torch.ones(6)).backward()
'''

DIRECT = '''
def embed_with_prompt(table, ids, prompt):
    e = table(ids)
    e.requires_grad = True
    CLONE
    e[:, 0] += prompt
    return e
table = nn.Embedding(12, 5)
for p in table.parameters():
    p.requires_grad = False
prompt = nn.Parameter(torch.zeros(5))
embed_with_prompt(table, torch.randint(0, 12, (3, 4)), prompt).sum().backward()
'''

PRETRAINED = '''
class Tagger(nn.Module):
    def __init__(self, vectors):
        super().__init__()
        self.lookup = nn.Embedding.from_pretrained(vectors FREEZE)
        self.proj = nn.Linear(4, 2)
        self.get_lookup().register_forward_hook(
            lambda m, i, out: out.requires_grad_(True))
    def get_lookup(self):
        return self.lookup
    def forward(self, ids, marker):
        x = self.lookup(ids)
        for b in range(x.shape[0]):
            x[b].select(0, 0).copy_(marker)
        return self.proj(x).sum()
Tagger(torch.randn(9, 4))(torch.randint(0, 9, (2, 3)), torch.ones(4)).backward()
'''

SHARED = (RuntimeError, "more than one element of the written-to tensor")

EXPANDED_LOCAL = '''
def normalise(scores):
    n = scores.shape[1]
    totals = scores.sum(dim=1, keepdim=True).expand_as(scores)COPY
    totals += 1e-6
    return scores / totals
w = nn.Parameter(torch.rand(3, 4))
normalise(w * 2).sum().backward()
'''

STATS_HELPER = '''
def update_stats(stat, value, momentum):
    with torch.no_grad():
        stat.copy_(momentum * value + (1 - momentum) * stat)
class Whiten(nn.Module):
    def __init__(self, groups, c):
        super().__init__()
        self.proj = nn.Linear(c, c)
        self.register_buffer("running_cov", torch.eye(c).unsqueeze(0).expand(groups, c, c)COPY)
    def forward(self, x):
        h = self.proj(x)
        cov = (h.t() @ h / h.shape[0]).expand_as(self.running_cov)
        if self.training:
            update_stats(self.running_cov, cov, 0.1)
        return h
Whiten(3, 4)(torch.randn(5, 4)).sum().backward()
'''

OVERLAP = (RuntimeError, "some elements of the input tensor and the written-to tensor")

SYMMETRIC = '''
def tie(w):
    with torch.no_grad():
        w.copy_(VALUE)
    return w
tie(torch.randn(5, 5))
'''

BANK = '''
class Bank(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 9)
    def forward(self, x):
        self.maps = self.proj(x).view(-1, 3, 3)
        k = 0
        self.maps[k] = VALUE
        return self.maps.sum()
Bank()(torch.randn(2, 4)).backward()
'''

UNION = '''
class Shape2D(nn.Module):
    def forward(self, pts):
        return self.distance(pts)
class Disk(Shape2D):
    def __init__(self, r):
        super().__init__()
        self.r = nn.Parameter(torch.tensor(r))
    def distance(self, pts):
        return pts.norm(dim=-1) - self.r
class Union(Shape2D):
    def __init__(self, *parts):
        super().__init__()
        self.parts = KEEP  # the members
    def distance(self, pts):
        return torch.stack([p(pts) for p in self.parts]).min(0).values
u = Union(Disk(1.0), Disk(0.5))
Union(Disk(2.0), Disk(0.2))
n_params = len(list(u.parameters()))
'''

META = '''
def leaf_copy(t, requires_grad=False):
    return t.detach().clone().requires_grad_(requires_grad)
class FastConv(nn.Module):
    def __init__(self, c):
        super().__init__()
        base = nn.Conv2d(c, c, 3, padding=1)
        self.register_buffer("kernel", leaf_copy(base.weight, FLAG))
    def forward(self, x):
        return F.conv2d(x, self.kernel, padding=1)
class Learner(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = FastConv(2)
    def forward(self, x):
        return self.body(x)
net = Learner()
opt = torch.optim.Adam([{"params": net.parameters(), "lr": 1e-3}])
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT618: a module-level hook function (output parameter `result`, `requires_grad_()`)
    # registered from outside the class on a frozen embedding; the write goes through a
    # `.view` of the output in a method. Look-alike: the embedding is trainable (runs)
    "hooked-frozen-embedding-view-written": (
        Shape(HOOKED.replace("FREEZE", "pass"), "GT618"),
        Shape(HOOKED.replace("FREEZE", "net.encoder.word_emb.weight.requires_grad = False"),
              "GT618", 11, raises=LEAF)),
    # GT618: `e.requires_grad = True` on the output of a table frozen by a parameters loop, in
    # a helper; look-alike: cloned before the write
    "flagged-output-of-frozen-table-updated": (
        Shape(DIRECT.replace("CLONE", "e = e.clone()"), "GT618"),
        Shape(DIRECT.replace("CLONE", "pass"), "GT618", 5, raises=LEAF)),
    # GT618: `Embedding.from_pretrained` (frozen by default), hook on the module a getter
    # method returns, a row view written with `copy_` in a loop. Look-alike: freeze=False
    "pretrained-embedding-row-copied-in-loop": (
        Shape(PRETRAINED.replace(" FREEZE", ", freeze=False"), "GT618"),
        Shape(PRETRAINED.replace(" FREEZE", ""), "GT618", 13, raises=LEAF)),
    # GT619: `expand_as` of a keepdim sum, then `+=` on it in a helper. Look-alike: cloned
    "expand-as-total-incremented-in-place": (
        Shape(EXPANDED_LOCAL.replace("COPY", ".clone()"), "GT619"),
        Shape(EXPANDED_LOCAL.replace("COPY", ""), "GT619", 4, raises=SHARED)),
    # GT619: a buffer registered as `eye.unsqueeze(0).expand(g, c, c)`, updated by a module
    # function of the file the forward passes it to. Look-alike: cloned
    "expanded-buffer-updated-by-helper": (
        Shape(STATS_HELPER.replace("COPY", ".clone()"), "GT619"),
        Shape(STATS_HELPER.replace("COPY", ""), "GT619", 8, raises=SHARED)),
    # GT620: `w.copy_(w.t())` under no_grad in a helper. Look-alike: the symmetric part
    # (out of place)
    "matrix-copied-from-own-transpose": (
        Shape(SYMMETRIC.replace("VALUE", "(w + w.t()) / 2"), "GT620"),
        Shape(SYMMETRIC.replace("VALUE", "w.t()"), "GT620", 3, raises=OVERLAP)),
    # GT620: a self attribute's row overwritten with its `.mT` in forward. Look-alike: cloned
    "attribute-row-from-own-mT": (
        Shape(BANK.replace("VALUE", "self.maps[k].mT.clone()"), "GT620"),
        Shape(BANK.replace("VALUE", "self.maps[k].mT"), "GT620", 8, raises=OVERLAP)),
    # GT401 in a subclass of a module class of the file whose lines say neither `Module` nor
    # `forward`, the list made from `*parts` (and a comment after it: comments never decide).
    # Look-alike: `nn.ModuleList(parts)`
    "varargs-parts-kept-in-list-by-subclass": (
        Shape(UNION.replace("KEEP", "nn.ModuleList(parts)"), "GT401", holds="n_params == 2"),
        Shape(UNION.replace("KEEP", "list(parts)"), "GT401", 13, holds="n_params == 0")),
    # GT421 (buffers): a held file class registers its kernel as a buffer made by a helper
    # given `requires_grad=True`-like flag; the optimizer takes the holder's parameters in a
    # param group (the group is then empty: nothing raises, the kernel never trains).
    # Look-alike: the buffer does not require grad (and the optimizer then gets
    # a held conv's parameters: replaced by a real layer)
    "weights-kept-as-grad-buffers-in-held-class": (
        Shape(META.replace("leaf_copy(base.weight, FLAG)", "base.weight.detach().clone()")
              .replace("self.body = FastConv(2)", "self.body = FastConv(2)\n        "
                       "self.head = nn.Conv2d(2, 2, 1)"), "GT421"),
        Shape(META.replace("leaf_copy(base.weight, FLAG)",
                           "leaf_copy(base.weight, requires_grad=True)"), "GT421", 17,
              holds="not opt.param_groups[0]['params'] and net.body.kernel.requires_grad")),
}


@pytest.mark.parametrize("key", sorted(SHAPES))
def test_lookalike_silent(key: str) -> None:
    judge(PRELUDE, SHAPES[key][0])


@pytest.mark.parametrize("key", sorted(SHAPES))
def test_buggy_twin_reported(key: str) -> None:
    judge(PRELUDE, SHAPES[key][1])
