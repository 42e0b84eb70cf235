"""Session-29 run-time diagnoses of crashes (docs/triage/runtime29c.md):

- NOTE [first write that broke a saved tensor] (runtime/trace/first_write.py), narrowed: an
  earlier in-place write counts only when the tensor it broke has the error's shape; when the
  message's shape tells its tensor apart, that tensor's own write is named (EfficientDet's two
  fusion weights);
- NOTE [cache filled under a guard] (runtime/trace/guarded_cache.py): a second backward() through
  values a cache check on ``self`` kept from the first call: the check is named (torchpme).

Buggy twins (code + line asserted), twins that keep the other line, and silent look-alikes. Real
torch, in-process: every bug below crashes on real torch.
"""
from __future__ import annotations

import pytest
from rt_helpers import marked_line

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
"""


def _run_line(f):
    return next((r["line"] for r in f["related"] if r["message"].startswith("confirmed at run")),
                f["line"])


def _check(run_script, src, code):
    res = run_script(src)
    assert res.code != 0, res.err
    assert res.findings, res.err
    f = res.findings[0]
    assert f["code"] == code, res.err
    assert _run_line(f) == marked_line(src), res.err


def _silent(run_script, src):
    res = run_script(src)
    assert res.code == 0, res.err
    assert [f for f in res.findings if f["source"] != "static"] == [], res.err


# ---- two in-place writes on tensors of different shapes: the one the error names

SHAPED_WRITES = {
    # the case's shape: two fusion weights, [2, 4] and [3, 4], each ReLU'd and divided in place
    "fusion_weights": """
w1, w2 = nn.Parameter(torch.rand(2, 4)), nn.Parameter(torch.rand(3, 4))
a = F.relu(w1)
a /= a.sum(0) + 1e-4
b = F.relu(w2)
b /= b.sum(0) + 1e-4  # <- cause
x = torch.randn(4)
((a @ x).sum() + (b @ x).sum()).backward()
""",
    # a variant the case does not show: sigmoid saves its output, method-form writes
    "sigmoid_method_writes": """
p, q = nn.Parameter(torch.randn(5)), nn.Parameter(torch.randn(2, 3))
s = torch.sigmoid(p)
s.mul_(2)
t = torch.sigmoid(q)
t.mul_(2)  # <- cause
(s.sum() + t.sum()).backward()
""",
}


@pytest.mark.parametrize("name", sorted(SHAPED_WRITES))
def test_write_of_the_tensor_the_error_names(run_script, name):
    _check(run_script, HEAD + SHAPED_WRITES[name], "GT602")


def test_same_shape_writes_still_name_the_earliest(run_script):
    # the twin: both tensors of one shape, the message cannot tell them apart: the earliest
    _check(run_script, HEAD + """
p, q = nn.Parameter(torch.randn(2, 3)), nn.Parameter(torch.randn(2, 3))
s = torch.sigmoid(p)
s.mul_(2)  # <- cause
t = torch.sigmoid(q)
t.mul_(2)
(s.sum() + t.sum()).backward()
""", "GT602")


def test_shaped_writes_out_of_place_are_silent(run_script):
    _silent(run_script, HEAD + """
w1, w2 = nn.Parameter(torch.rand(2, 4)), nn.Parameter(torch.rand(3, 4))
a = F.relu(w1)
a = a / (a.sum(0) + 1e-4)
b = F.relu(w2)
b = b / (b.sum(0) + 1e-4)
x = torch.randn(4)
((a @ x).sum() + (b @ x).sum()).backward()
""")


# ---- values cached under a check on self, reused by the next call
# (NOTE [cache filled under a guard])

GUARDED = {
    # the case's shape: the check calls a helper object's method that stores the value
    "helper_method": """
class Filter:
    def update(self, cell):
        self.kernel = torch.linalg.inv(cell).norm(dim=0).exp()


class Potential(nn.Module):
    def __init__(self):
        super().__init__()
        self._cell_cache = -torch.ones(3, 3)
        self._f = Filter()

    def forward(self, pos, cell):
        if not torch.allclose(cell, self._cell_cache):  # <- cause
            self._cell_cache = cell.detach().clone()
            self._f.update(cell)
        return (pos * self._f.kernel).sum()


pot = Potential()
for _ in range(2):
    pos = torch.rand(5, 3, requires_grad=True)
    cell = (2 * torch.eye(3)).requires_grad_()
    pot(pos, cell).backward()
""",
    # a variant the case does not show: the value made in the guarded block itself, a size check
    "size_check_in_place": """
class Table(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))
        self.n = 0
        self.table = None

    def forward(self, x):
        if x.shape[0] > self.n:  # <- cause
            self.n = x.shape[0]
            self.table = torch.arange(self.n).float() * self.scale
        return (x * self.table[: x.shape[0]]).sum()


tab = Table()
for _ in range(2):
    tab(torch.randn(4)).backward()
""",
}


@pytest.mark.parametrize("name", sorted(GUARDED))
def test_cache_check_named(run_script, name):
    _check(run_script, HEAD + GUARDED[name], "GT507")


def test_cache_kept_detached_is_silent(run_script):
    # the look-alike: the check caches values built from detached inputs
    _silent(run_script, HEAD + GUARDED["helper_method"].replace(
        "self._f.update(cell)", "self._f.update(cell.detach())").replace("  # <- cause", ""))


def test_cache_rebuilt_every_call_is_silent(run_script):
    # the look-alike: every call is longer than the cache, so the check rebuilds it each time
    _silent(run_script, HEAD + GUARDED["size_check_in_place"].replace(
        "for _ in range(2):", "for i in range(2):").replace(
        "tab(torch.randn(4))", "tab(torch.randn(4 + i))").replace("  # <- cause", ""))


def test_value_built_once_outside_a_check_keeps_its_line(run_script):
    # the twin: a value computed once before the loop, no cache check: its own line
    _check(run_script, HEAD + """
scale = nn.Parameter(torch.ones(1))
table = torch.arange(4).float() * scale  # <- cause
for _ in range(2):
    (torch.randn(4) * table).sum().backward()
""", "GT507")


# ---- a local detached for one use, handed whole to another
# (NOTE [detached for one use, handed whole to another])

HALF_DETACHED = {
    # the case's shape: a critic loop over one generator output; the penalty gets it whole
    "critic_penalty": """
def penalty(d, real, fake):
    mix = 0.5 * real + 0.5 * fake
    return d(mix).pow(2).mean()


class GAN:
    def __init__(self):
        self.g, self.d = nn.Linear(4, 4), nn.Linear(4, 1)
        self.opt_d = torch.optim.SGD(self.d.parameters(), lr=0.1)

    def step_d(self, real):
        pair = torch.cat((real, self.fake), 1)
        loss = self.d(pair.detach()[:, :4]).mean()
        loss = loss + penalty(self.d, real, pair[:, 4:])
        loss.backward()

    def train(self, real):
        self.fake = self.g(real)
        for _ in range(2):
            self.opt_d.zero_grad()
            self.step_d(real)
            self.opt_d.step()


GAN().train(torch.randn(2, 4))
""",
    # a variant the case does not show: a script-level loop, the whole value passed by keyword
    "keyword_argument": """
enc, head = nn.Linear(4, 4), nn.Linear(4, 1)
feats = enc(torch.randn(3, 4))
for _ in range(2):
    z = feats * 2
    main = head(z.detach()).mean()
    aux = F.mse_loss(input=z, target=torch.zeros(3, 4))  # <- cause
    (main + aux).backward()
""",
}


def test_half_detached_keyword_variant(run_script):
    _check(run_script, HEAD + HALF_DETACHED["keyword_argument"], "GT507")


def test_half_detached_critic_twin_keeps_the_slice_line(run_script):
    # the twin: the whole local reaches the penalty through a slice (`pair[:, 4:]`), not as an
    # argument itself: no call hands `pair` on whole, so the value's own line is kept
    res = run_script(HEAD + HALF_DETACHED["critic_penalty"])
    assert res.code != 0 and res.findings, res.err
    assert "handed on detached" not in res.findings[0]["message"], res.err


def test_half_detached_all_detached_is_silent(run_script):
    # the look-alike: the same two uses, the features computed again on every pass
    _silent(run_script, HEAD + HALF_DETACHED["keyword_argument"].replace(
        "feats = enc(torch.randn(3, 4))\nfor _ in range(2):\n",
        "for _ in range(2):\n    feats = enc(torch.randn(3, 4))\n").replace("  # <- cause", ""))


# ---- backward() inside a backward hook (NOTE [backward inside a backward hook])

HOOKED = {
    # the case's shape: a full backward hook builds a graph from a leaf and backpropagates it
    "full_module_hook": """
def hook(module, grad_in, grad_out):
    inp = torch.eye(4, 5, requires_grad=True)
    out = (inp + 1).pow(2).t()  # <- cause
    out.backward(torch.ones_like(out))


layer = nn.Linear(3, 3)
layer.register_full_backward_hook(hook)
layer(torch.randn(2, 3)).sum().backward()
""",
    # a variant the case does not show: a tensor hook fitting a parameter on the gradient
    "tensor_hook_parameter": """
probe = nn.Parameter(torch.ones(3))


def fit(grad):
    err = (probe * grad).sum()  # <- cause
    err.backward()
    return grad


x = torch.randn(3, requires_grad=True)
y = x * 2
y.register_hook(fit)
y.sum().backward()
""",
}


@pytest.mark.parametrize("name", sorted(HOOKED))
def test_backward_in_hook_names_the_hook_line(run_script, name):
    _check(run_script, HEAD + HOOKED[name], "GT203")


def test_backward_in_hook_with_grad_enabled_is_silent(run_script):
    # the look-alike: the hook turns grad mode back on for its own graph
    _silent(run_script, HEAD + HOOKED["tensor_hook_parameter"].replace(
        "    err = (probe * grad).sum()  # <- cause\n    err.backward()\n",
        "    with torch.enable_grad():\n        err = (probe * grad).sum()\n        err.backward()\n"))


def test_backward_outside_hooks_keeps_its_reading(run_script):
    # the twin: a loss computed under no_grad at top level is not a hook's: the block is named
    res = run_script(HEAD + """
w = nn.Parameter(torch.ones(3))
with torch.no_grad():
    loss = (w * 2).sum()
loss.backward()
""")
    assert res.code != 0 and res.findings, res.err
    assert "backward hook" not in res.findings[0]["message"], res.err
