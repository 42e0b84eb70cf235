"""runtime42 on real torch, one process, a few steps, tiny models.

- NOTE [frozen extractor dropping] (GT859): a module frozen with ``requires_grad_(False)`` and
  left in train mode by ``model.train()`` keeps its dropout active (s3prl's upstream): named at
  the call of the frozen module. Silent: the frozen module put in eval, a frozen transformer
  under a trained prompt (its input requires grad), Monte-Carlo dropout switched back on in an
  eval-mode module, a lazy trained head.
- NOTE [input read for its gradient, made without one] (GT801): ``grad = images.grad`` and a
  crash on ``grad.detach()`` (foolbox): named at the statement that made ``images``, passing
  over an old-API branch that asks for a gradient. The input made to require grad: silent.
- NOTE [integer term is a count] (GT844): a Hamming cost ``(tree != gold).sum()`` added to a
  live score (self-attentive-parser's loss-augmented decoding) is no dead term; the same term
  as a float copy of the output is still one.
"""
from __future__ import annotations

import pytest

from tests.runtime.rt_helpers import marked_line

torch = pytest.importorskip("torch")

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
"""

EXTRACTOR = """
class Extractor(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(6, 8)
        self.drop = nn.Dropout(0.2)

    def forward(self, x):
        return self.drop(torch.relu(self.proj(x)))

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.extractor = Extractor()
        self.extractor.requires_grad_(False)
        self.head = HEAD_LAYER

    def forward(self, x):
        SWITCH
        h = self.extractor(x)  # <- cause
        return self.head(h)

model = Model()
opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
for _ in range(3):
    model.train()
    x, y = torch.randn(5, 6), torch.randint(0, 3, (5,))
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _extractor(switch: str = "pass", head: str = "nn.Linear(8, 3)") -> str:
    return HEAD + EXTRACTOR.replace("SWITCH", switch).replace("HEAD_LAYER", head)


def test_frozen_extractor_in_train_mode_named_at_its_call(run_script):
    src = _extractor()
    res = run_script(src)
    assert res.code == 0, res.err
    assert [(f["code"], f["line"]) for f in res.findings][:1] == [("GT859", marked_line(src))], \
        res.findings


PROMPT = """
layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, batch_first=True)
layer.requires_grad_(False)
prompt = nn.Parameter(torch.randn(1, 2, 8))
head = nn.Linear(8, 3)
opt = torch.optim.SGD([prompt, *head.parameters()], lr=0.1)
for _ in range(3):
    layer.train()
    x = torch.randn(4, 5, 8)
    h = layer(torch.cat([prompt.expand(4, -1, -1), x], 1))
    loss = F.cross_entropy(head(h[:, 0]), torch.randint(0, 3, (4,)))
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

MC_DROPOUT = EXTRACTOR.replace("        SWITCH\n", "").replace(
    "    model.train()\n", "    model.train()\n    model.extractor.eval()\n"
    "    model.extractor.drop.train()\n")


@pytest.mark.parametrize("src", [
    _extractor("self.extractor.eval()"), HEAD + PROMPT,
    HEAD + MC_DROPOUT.replace("HEAD_LAYER", "nn.Linear(8, 3)"),
    _extractor(head="nn.LazyLinear(3)"),
], ids=["extractor_in_eval", "frozen_layer_under_trained_prompt", "mc_dropout_switched_on",
        "lazy_head"])
def test_frozen_extractor_look_alikes_silent(run_script, src):
    if "LazyLinear" in src:  # the optimizer is built after the lazy head is materialised
        src = src.replace("model = Model()\n", "model = Model()\nmodel(torch.randn(2, 6))\n")
    res = run_script(src)
    assert res.code == 0, res.err
    codes = res.codes()
    if "LazyLinear" in src:  # the trained head is lazy: the frozen extractor is still named
        assert codes[:1] == ["GT859"], res.findings
    else:
        assert "GT859" not in codes, res.findings


def test_uninitialized_parameter_beside_frozen_extractor_under_trace(monkeypatch):
    """The first dropout run meets a parent holding a lazy head still uninitialised (its
    UninitializedParameter read for requires_grad), and a frozen lazy extractor materialised
    first: under trace() in strict mode (our errors raise) shapes materialise and the run ends
    clean; the frozen extractor is still named."""
    import torch.nn as nn

    import gradtrace

    monkeypatch.setenv("GRADTRACE_STRICT", "1")
    torch.manual_seed(0)
    with gradtrace.trace() as tr:
        ext = nn.Sequential(nn.LazyLinear(4), nn.Dropout(0.3))
        ext(torch.randn(2, 3))
        ext.requires_grad_(False)
        model = nn.Sequential(ext, nn.LazyLinear(1))
        model(torch.randn(2, 3))
        opt = torch.optim.SGD(model[1].parameters(), lr=0.1)
        for _ in range(3):
            loss = model(torch.randn(5, 3)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert ext[0].weight.shape == (4, 3) and model[1].weight.shape == (1, 4)
    assert [f.code for f in tr.findings] == ["GT859"], [f.message for f in tr.findings]


INPUT_GRAD = """
model = nn.Sequential(nn.Linear(4, 3)).eval()
OLD = False

def input_gradient(image, label):
    images = torch.from_numpy(image[None])  # <- cause
    if OLD:
        images = torch.tensor(images, requires_grad=True)
    MAKE
    loss = F.cross_entropy(model(images), torch.tensor([label]))
    loss.backward()
    grad = images.grad
    grad = grad.detach()
    return grad.numpy()

import numpy as np
for _ in range(2):
    g = input_gradient(np.random.rand(4).astype(np.float32), 1)
"""


def test_input_gradient_without_requires_grad_named_where_made(run_script):
    src = HEAD + INPUT_GRAD.replace("MAKE", "pass")
    res = run_script(src)
    assert res.code != 0
    assert [(f["code"], f["line"]) for f in res.findings][:1] == [("GT801", marked_line(src))], \
        res.findings


def test_input_gradient_with_requires_grad_silent(run_script):
    res = run_script(HEAD + INPUT_GRAD.replace("MAKE", "images.requires_grad_()"))
    assert res.code == 0, res.err
    assert not res.findings, res.findings


MARGIN = """
emb, lin = nn.Embedding(10, 8), nn.Linear(8, 3)
opt = torch.optim.Adam([*emb.parameters(), *lin.parameters()], lr=0.02)
for _ in range(4):
    words = torch.randint(0, 10, (6,))
    gold = words % 3
    scores = lin(emb(words))
    tree = (scores + 1.0 - F.one_hot(gold, 3).float()).argmax(-1)
    score = scores.gather(1, tree[:, None]).sum() + TERM  # <- cause
    loss = score - scores.gather(1, gold[:, None]).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_integer_count_term_is_no_dead_term(run_script):
    res = run_script(HEAD + MARGIN.replace("TERM", "(tree != gold).sum()"))
    assert res.code == 0, res.err
    assert "GT844" not in res.codes(), res.findings


def test_float_copy_of_output_still_a_dead_term(run_script):
    src = HEAD + MARGIN.replace("TERM", "scores.argmax(-1).float().mean()")
    res = run_script(src)
    assert res.code == 0, res.err
    assert "GT844" in res.codes(), res.findings


BRANCHES = """
model = nn.Linear(4, 1)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(1, 9):
    PRE
    if step % 3 == 0:
        loss = model(torch.randn(5, 4)).pow(2).mean()
    else:
        opt.zero_grad()  # <- cause
        loss = (model(torch.randn(5, 4)) - 1).pow(2).mean()
    loss.backward()
    opt.step()
"""


def test_clear_in_one_branch_named(run_script):
    """NOTE [clear on some passes only]: eve's loop clears only in the `else` branch."""
    src = HEAD + BRANCHES.replace("PRE", "pass")
    res = run_script(src)
    assert res.code == 0, res.err
    assert [(f["code"], f["line"]) for f in res.findings][:1] == [("GT501", marked_line(src))], \
        res.findings


def test_clear_on_every_pass_silent(run_script):
    res = run_script(HEAD + BRANCHES.replace("PRE", "opt.zero_grad()"))
    assert res.code == 0, res.err
    assert "GT501" not in res.codes(), res.findings


def test_clear_before_the_loop_keeps_its_finding(run_script):
    """A clear that is in no branch is not this NOTE's: GT502 as before."""
    src = HEAD + BRANCHES.replace("PRE", "pass").replace(
        "        opt.zero_grad()  # <- cause\n", "        pass\n").replace(
        "for step in range(1, 9):", "opt.zero_grad()  # <- cause\nfor step in range(1, 9):")
    res = run_script(src)
    assert res.code == 0, res.err
    assert [(f["code"], f["line"]) for f in res.findings][:1] == [("GT502", marked_line(src))], \
        res.findings


KL_TARGET = """
model = nn.Linear(6, 5)
with torch.no_grad():
    model.weight.mul_(400.0)  # confident: clean probabilities underflow to 0
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.rand(8, 6)
for _ in range(2):
    x_adv = x.clone().requires_grad_(True)
    g, = torch.autograd.grad(model(x_adv).logsumexp(1).sum(), x_adv)  # an attack's gradient first
    logits_adv, logits_clean = model(x + 0.01 * g.sign()), model(x)
    target = TARGET
    loss = nn.KLDivLoss(reduction="batchmean")(F.log_softmax(logits_adv, 1), target)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_kl_target_underflow_named_at_the_target(run_script):
    """NOTE [NaN born in a library op], hunted on the first backward() after autograd.grad."""
    src = HEAD + KL_TARGET.replace("TARGET", "F.softmax(logits_clean, 1)  # <- cause")
    res = run_script(src)
    assert res.code == 0, res.err
    assert [(f["code"], f["line"]) for f in res.findings][:1] == [("GT825", marked_line(src))], \
        res.findings


def test_kl_target_clamped_silent(run_script):
    res = run_script(HEAD + KL_TARGET.replace(
        "TARGET", "torch.clamp(F.softmax(logits_clean, 1), min=1e-12)"))
    assert res.code == 0, res.err
    assert "GT825" not in res.codes(), res.findings


def test_frozen_parameters_held_by_the_optimizer_not_an_extractor(run_script):
    """BYOL-A's shape: the frozen encoder's parameters are in the optimizer (a freeze the
    program meant to undo, or a freeze for a while): not GT859."""
    src = _extractor().replace(
        "opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)",
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)")
    res = run_script(src)
    assert res.code == 0, res.err
    assert "GT859" not in res.codes(), res.findings
