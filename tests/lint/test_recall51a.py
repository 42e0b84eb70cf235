"""Session 51, helper recall51a: a loss that returns its terms re-made as new leaves (NOTE
[returned fresh leaves]), judged by its callers in the file or in another file of the
project. Each shape: a buggy twin with its code and lines, silent look-alikes."""
from __future__ import annotations

import os
import textwrap

from gradtrace.lint import check_source


def _found(src: str, code: str) -> list[int]:
    return sorted(f.line for f in check_source(textwrap.dedent(src)) if f.code == code)


# a loss module (no weights of its own) hands back each averaged term as a new leaf
LEAVES = '''
import torch
import torch.nn as nn


class PartLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.ce = nn.CrossEntropyLoss()

    def forward(self, target, pred):
        parts = {{"a": [], "b": []}}
        for k in parts:
            parts[k].append(self.ce(pred, target))
        return [{leaf} for v in parts.values()]


def fit(model, opt, crit, batches):
    for x, y in batches:
        opt.zero_grad()
        got = crit(y, {pred})
        sum(got).backward()
        opt.step()
        {after}


model = nn.Linear(3, 2)
crit = PartLoss()
fit(model, torch.optim.SGD(model.parameters(), lr=0.1), crit, [])
'''
LEAF = "torch.tensor(sum(v) / len(v), requires_grad=True)"


def _leaves(leaf: str = LEAF, pred: str = "model(x)", after: str = "pass") -> list[int]:
    return _found(LEAVES.format(leaf=leaf, pred=pred, after=after), "GT119")


def test_loss_module_returns_its_terms_as_new_leaves():
    assert _leaves() == [15]


def test_loss_module_returns_detached_terms_made_leaves():
    assert _leaves(leaf="(sum(v) / len(v)).detach().requires_grad_(True)") == [15]


def test_look_alike_terms_returned_with_their_graph():
    assert _leaves(leaf="sum(v) / len(v)") == []


def test_look_alike_loss_handed_no_graph():
    # handed data only: no model upstream of the leaves (GT125's shape, not this one)
    assert _leaves(pred="torch.randn(4, 2)") == []


def test_look_alike_constant_leaf_returned():
    assert _leaves(leaf="torch.tensor(0.0, requires_grad=True)") == []


def test_look_alike_leaf_gradient_read_by_the_caller():
    assert _leaves(after="print(got[0].grad)") == []


# a module with weights that leaves its input for an attribution read back through `.grad`
ATTRIBUTION = '''
import torch
import torch.nn as nn


class Leaf(nn.Module):
    def forward(self, h):
        return h.detach().clone().requires_grad_(True)


def saliency(backbone, head, x):
    feat = Leaf()(backbone(x))
    head(feat).sum().backward()
    return feat.grad.abs()
'''


def test_look_alike_leaf_module_for_attribution():
    assert _found(ATTRIBUTION, "GT119") == []


# a loss function hands back a tuple of new leaves; its caller backpropagates their sum
TUPLE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


def two_terms(pred, y):
    a = F.mse_loss(pred, y)
    b = pred.abs().mean()
    return {ret}


def step(model, opt, x, y):
    rec, reg = two_terms(model(x), y)
    (rec + reg).backward()
    opt.step()


net = nn.Linear(3, 3)
step(net, torch.optim.SGD(net.parameters(), lr=0.1), torch.randn(2, 3), torch.randn(2, 3))
'''


def test_loss_function_returns_a_tuple_of_new_leaves():
    ret = "a.detach().requires_grad_(), b.detach().requires_grad_()"
    assert _found(TUPLE.format(ret=ret), "GT119") == [10, 10]


def test_look_alike_loss_function_returns_its_terms():
    assert _found(TUPLE.format(ret="a, b"), "GT119") == []


LOSS_FILE = '''
import torch
import torch.nn as nn


class PartLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.ce = nn.CrossEntropyLoss()

    def forward(self, target, pred):
        terms = [self.ce(pred, target), pred.pow(2).mean()]
        return [{leaf} for t in terms]
'''

TRAIN_FILE = '''
import torch
import torch.nn as nn
from parts import PartLoss

model = nn.Linear(3, 2)
crit = PartLoss()
for x, y in [(torch.randn(4, 3), torch.randint(0, 2, (4,)))]:
    out = model(x)
    got = crit(y, out)
    {run}
'''


def _project(tmp_path, leaf: str = "torch.tensor(t.mean(), requires_grad=True)",
             run: str = "sum(got).backward()") -> list[int]:
    from gradtrace.lint import check_paths
    (tmp_path / "parts.py").write_text(LOSS_FILE.format(leaf=leaf))
    (tmp_path / "train.py").write_text(TRAIN_FILE.format(run=run))
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        found = check_paths(["parts.py"]).findings
    finally:
        os.chdir(here)
    return sorted(f.line for f in found if f.code == "GT119")


def test_loss_file_without_a_step_judged_by_its_importer(tmp_path):
    assert _project(tmp_path) == [13]


def test_abroad_look_alike_terms_kept(tmp_path):
    assert _project(tmp_path, leaf="t") == []


def test_abroad_look_alike_value_only_printed(tmp_path):
    assert _project(tmp_path, run="print([float(g) for g in got])") == []


# an entry of the model's output dict is detached before the dict goes to the file's loss
ENTRIES = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class RateLoss(nn.Module):
    def __init__(self, lmbda=0.01):
        super().__init__()
        self.lmbda = lmbda

    def forward(self, output, target):
        rate = sum(-torch.log2(p).mean() for p in output["probs"].values())
        dist = F.mse_loss({recon}, target)
        loss = self.lmbda * dist + rate
        return {{"loss": loss, "rate": rate, "mse": F.mse_loss(output["recon"], target)}}


def train(model, opt, batches):
    crit = RateLoss()
    for x in batches:
        opt.zero_grad()
        out = model(x)
        {before}
        losses = crit(out, x)
        losses["{key}"].backward()
        opt.step()
        {after}


net = nn.Linear(4, 4)
train(net, torch.optim.SGD(net.parameters(), lr=0.1), [])
'''
CUT = 'out["recon"] = out["recon"].detach().clamp(0, 1)'


def _entries(recon: str = 'output["recon"]', before: str = CUT, key: str = "loss",
             after: str = "pass") -> list[int]:
    return _found(ENTRIES.format(recon=recon, before=before, key=key, after=after), "GT107")


def test_entry_detached_before_the_loss_module_reads_it():
    assert _entries() == [24]


FUNC = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


def rate_loss(output, target, lmbda=0.01):
    rate = sum(-torch.log2(p).mean() for p in output["probs"].values())
    dist = F.mse_loss(output["recon"], target)
    return lmbda * dist + rate


def train(model, opt, batches):
    for x in batches:
        opt.zero_grad()
        out = model(x)
        {cut}
        loss = rate_loss(out, x)
        loss.backward()
        opt.step()


net = nn.Linear(4, 4)
train(net, torch.optim.SGD(net.parameters(), lr=0.1), [])
'''


def test_entry_detached_before_a_loss_function_reads_it():
    assert _found(FUNC.format(cut=CUT), "GT107") == [17]


def test_look_alike_loss_function_handed_the_whole_dict():
    assert _found(FUNC.format(cut="pass"), "GT107") == []


def test_look_alike_entry_detached_after_the_loss():
    assert _entries(before="pass", after=CUT) == []


def test_look_alike_detached_entry_read_only_for_a_logged_value():
    assert _entries(key="rate") == []


def test_look_alike_term_reads_a_live_entry_too():
    assert _entries(recon='output["recon"] + 0 * output["probs"]["y"]') == []


def test_look_alike_entry_detached_on_one_arm():
    assert _entries(before=f"if x.shape[0] > 1:\n            {CUT}") == []


def test_look_alike_other_entry_detached():
    assert _entries(before='out["aux"] = out["aux"].detach()') == []


# a quantizer reaching its input only through an index, decoded into a loss (GT126)
VQ = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Book(nn.Module):
    def __init__(self, n, d):
        super().__init__()
        self.rows = nn.Embedding(n, d)

    def forward(self, h):
        b, d = h.shape
        dist = ((h.unsqueeze(1) - self.rows.weight.unsqueeze(0)) ** 2).sum(-1)
        idx = {index}
        return {ret}


enc, book, dec = nn.Linear(6, 3), Book(8, 3), nn.Linear(3, 6)
opt = torch.optim.Adam([*enc.parameters(), *book.parameters(), *dec.parameters()])
for x in [torch.randn(4, 6)]:
    {grad}h = enc(x)
    c = book(h)
    {mid}
    out = dec(c)
    loss = {loss} + F.mse_loss(h, c.detach())
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


def _vq(index: str = "torch.argmin(dist, dim=1)", ret: str = "self.rows(idx).view(b, d)",
        mid: str = "pass", loss: str = "F.mse_loss(out, x)", grad: str = "") -> list[int]:
    return _found(VQ.format(index=index, ret=ret, mid=mid, loss=loss, grad=grad), "GT126")


def test_codebook_lookup_decoded_into_the_loss():
    assert _vq() == [25]


def test_codebook_lookup_by_argmin_method_decoded():
    assert _vq(index="dist.argmin(1)") == [25]


def test_look_alike_straight_through_before_decoding():
    assert _vq(mid="c = h + (c - h).detach()") == []


def test_look_alike_quantizer_returns_the_straight_through_value():
    assert _vq(ret="h + (self.rows(idx) - h).detach()") == []


def test_look_alike_decoded_lookup_only_shown():
    assert _vq(loss="0 * x.sum()") == []


def test_look_alike_encoder_frozen():
    assert _vq(mid="enc.requires_grad_(False)") == []


# a loss module of the file cuts the prediction it is handed (NOTE [entry cut before the loss])
EDGE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class EdgeLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("k", torch.ones(1, 1, 3, 3))

    def forward(self, pred, image):
        size = pred.size()
        p = {p}
        return (F.conv2d(p, self.k, padding=1) * image.mean(1, keepdim=True)).mean()


model = nn.Conv2d(3, 2, 3, padding=1)
crit, edge = nn.CrossEntropyLoss(), EdgeLoss()
opt = torch.optim.Adam(model.parameters())
for x, y in [(torch.rand(2, 3, 8, 8), torch.randint(0, 2, (2, 8, 8)))]:
    out = model(x)
    loss = crit(out, y) + 0.5 * edge({args})
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


def _edge(p: str = "pred.argmax(1).view(size[0], 1, size[2], size[3]).float()",
          args: str = "out, x") -> list[int]:
    return sorted((f.code, f.line) for f in check_source(textwrap.dedent(
        EDGE.format(p=p, args=args))) if f.code in ("GT107", "GT108"))


def test_loss_module_takes_argmax_of_the_prediction():
    assert _edge() == [("GT108", 14)]


def test_loss_module_detaches_the_prediction():
    assert _edge(p="pred[:, 1:2].detach()") == [("GT107", 14)]


def test_look_alike_loss_module_keeps_the_prediction():
    assert _edge(p="pred.softmax(1)[:, 1:2]") == []


def test_look_alike_loss_module_cuts_only_data():
    assert _edge(args="x[:, :2], x") == []
