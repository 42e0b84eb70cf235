"""Session-26 run-time diagnoses of crashes (docs/triage/runtime26b.md):

- NOTE [helper that owns the leaf] (runtime/trace/root_sites.py): an in-place write on a leaf
  that requires grad, inside a helper that itself changes that argument's autograd state
  (``detach_()``, ``requires_grad = False``), is said at the write, not at the caller.

Buggy twins (code + line asserted), twins whose other line stays the cause, and silent
look-alikes. Real torch, in-process: every bug below crashes on real torch.
"""
from __future__ import annotations

import pytest
from rt_helpers import marked_line

HEAD = """
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
"""


def _run_finding(res):
    found = [f for f in res.findings if f["source"] != "static"]
    assert found, res.err
    return found[0]


def _first(res):
    assert res.findings, res.err
    return res.findings[0]


def _run_line(f):
    """The line the run itself named: the finding's, or (fused into a static finding that
    keeps its own line) the one of its "confirmed at run time" entry."""
    return next((r["line"] for r in f["related"] if r["message"].startswith("confirmed at run")),
                f["line"])


# ---- a helper that fills a Parameter and then freezes it (NOTE [helper that owns the leaf]) --

OWNER_BUGS = {
    # the transformer notebook's shape: slice writes, then detach_() and requires_grad = False
    "sinusoid_then_frozen": """
def fill_sinusoids(n, dim, E):
    pos = np.arange(n)[:, None] / np.power(10000, 2 * (np.arange(dim)[None] // 2) / dim)
    E[:, 0::2] = torch.FloatTensor(np.sin(pos[:, 0::2]))  # <- cause
    E[:, 1::2] = torch.FloatTensor(np.cos(pos[:, 1::2]))
    E.detach_()
    E.requires_grad = False


class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(20, 8)
        self.pos = nn.Embedding(10, 8)
        fill_sinusoids(10, 8, self.pos.weight)

    def forward(self, ids):
        return self.tok(ids) + self.pos(torch.arange(ids.size(1)))


emb = Embed()
head = nn.Linear(8, 2)
opt = torch.optim.Adam([p for p in [*emb.parameters(), *head.parameters()] if p.requires_grad])
loss = F.cross_entropy(head(emb(torch.randint(0, 20, (4, 6))).mean(1)), torch.tensor([0, 1, 0, 1]))
loss.backward()
opt.step()
""",
    # a variant the cases do not show: a method, copy_() of a table, then requires_grad_(False)
    "method_copies_table_then_freezes": """
class Tagger(nn.Module):
    def __init__(self, table):
        super().__init__()
        self.lookup = nn.Embedding(*table.shape)
        self._load_frozen(self.lookup.weight, table)
        self.out = nn.Linear(table.shape[1], 3)

    def _load_frozen(self, w, table):
        w.copy_(table)  # <- cause
        w.requires_grad_(False)

    def forward(self, ids):
        return self.out(self.lookup(ids).mean(1))


model = Tagger(torch.randn(30, 6))
opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
loss = F.cross_entropy(model(torch.randint(0, 30, (4, 5))), torch.tensor([0, 1, 2, 0]))
loss.backward()
opt.step()
""",
}

# a generic initialiser that does not touch the argument's autograd state: the caller that
# handed it a Parameter with grad mode on stays the cause (e2cnn's shape)
CALLER_BUGS = {
    "generic_init_helper": """
def scaled_init(t, fan):
    t[:] = torch.randn_like(t) / fan ** 0.5


conv = nn.Conv2d(2, 4, 3)
scaled_init(conv.weight, 18)  # <- cause
opt = torch.optim.SGD(conv.parameters(), lr=0.1)
conv(torch.randn(1, 2, 6, 6)).mean().backward()
opt.step()
""",
}

OWNER_LOOKALIKES = {
    # the same helper with the writes under no_grad (the fixed notebook)
    "sinusoid_under_no_grad": """
def fill_sinusoids(n, dim, E):
    pos = np.arange(n)[:, None] / np.power(10000, 2 * (np.arange(dim)[None] // 2) / dim)
    with torch.no_grad():
        E[:, 0::2] = torch.FloatTensor(np.sin(pos[:, 0::2]))
        E[:, 1::2] = torch.FloatTensor(np.cos(pos[:, 1::2]))
    E.detach_()
    E.requires_grad = False


pos = nn.Embedding(10, 8)
fill_sinusoids(10, 8, pos.weight)
head = nn.Linear(8, 2)
opt = torch.optim.Adam(head.parameters())
loss = F.cross_entropy(head(pos(torch.arange(4))), torch.tensor([0, 1, 0, 1]))
loss.backward()
opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(OWNER_BUGS))
def test_helper_that_freezes_its_argument_keeps_the_write(run_script, name):
    src = HEAD + OWNER_BUGS[name]
    res = run_script(src)
    assert res.code != 0, res.err  # real torch: in-place write on a leaf that requires grad
    f = _first(res)
    assert f["code"] == "GT302", res.err
    assert _run_line(f) == marked_line(src), res.err


@pytest.mark.parametrize("name", sorted(CALLER_BUGS))
def test_generic_initialiser_names_its_caller(run_script, name):
    src = HEAD + CALLER_BUGS[name]
    res = run_script(src)
    assert res.code != 0, res.err
    f = _first(res)
    assert f["code"] == "GT302", res.err
    assert _run_line(f) == marked_line(src), res.err


@pytest.mark.parametrize("name", sorted(OWNER_LOOKALIKES))
def test_helper_writing_under_no_grad_is_silent(run_script, name):
    res = run_script(HEAD + OWNER_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert [f for f in res.findings if f["source"] != "static"] == [], res.err
