"""runtime44b on real torch, one process, a few steps, tiny models.

- NOTE [argument the callee ignores] (GT702 from GT812's crash): ``autograd.grad(loss, noise)``
  where ``noise`` went into a value handed to a callback that never reads its parameter
  (SMART's ``eval_fn``): named at the callback's ``return``. Silent: the callback reads its
  parameter (no crash). Kept at the autograd.grad line: the input simply never used, a
  callback taking ``*args``.
- NOTE [loss of plain tensors] (GT800): a loss demonstrated on ``logits = torch.rand(...)``, no
  parameter that trains anywhere: named at the line that made the logits. Silent: the logits
  made with ``requires_grad=True``. Kept at the backward(): two plain float inputs (prediction
  and target), a model whose output was detached (the cut's own line), an optimizer built over a
  leaf, a loss computed from a tensor that requires grad through a wrapper that dropped the graph.
- NOTE [reduced before it was paired] (GT861): REINFORCE's log-probabilities averaged before
  they are multiplied by the per-step returns and summed (Gymnasium's tutorial): named at the
  mean. Silent: the product taken element by element, a mean times a scalar weight, a mean
  times a weight of another shape, a mean times a value with a graph.
"""
from __future__ import annotations

import pytest

from tests.runtime.rt_helpers import marked_line

torch = pytest.importorskip("torch")

PERTURB = """
import torch
import torch.nn as nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
x = torch.randn(3, 4)


class Smoother:
    def __init__(self, eval_fn):
        self.eval_fn = eval_fn

    def __call__(self, inputs):
        noise = torch.randn_like(inputs, requires_grad=True)
        perturbed = inputs + 0.1 * noise
        out = self.eval_fn(perturbed)
        loss = out.pow(2).sum()
        grad, = torch.autograd.grad(loss, noise)  # <- crash
        return grad.norm()


CALLBACK
print(Smoother(eval_fn)(x))
"""
IGNORES = """def eval_fn(inputs):
    h = model[0](x)
    return model[2](model[1](h))  # <- cause"""
READS = """def eval_fn(inputs):
    h = model[0](inputs)
    return model[2](model[1](h))"""
STARRED = """def eval_fn(*inputs):
    h = model[0](x)
    return model[2](model[1](h))"""
UNUSED = PERTURB.replace("perturbed = inputs + 0.1 * noise", "perturbed = inputs + 0.1")


def test_callee_ignoring_its_argument_named_at_its_return(run_script):
    src = PERTURB.replace("CALLBACK", IGNORES)
    res = run_script(src)
    assert res.code != 0
    assert [(f["code"], f["line"]) for f in res.findings][:1] == \
        [("GT702", marked_line(src))], res.findings


def test_lambda_ignoring_its_argument_named_at_the_lambda(run_script):
    src = PERTURB.replace("CALLBACK", "eval_fn = lambda inputs: model(x)  # <- cause")
    res = run_script(src)
    assert res.code != 0
    assert [(f["code"], f["line"]) for f in res.findings][:1] == \
        [("GT702", marked_line(src))], res.findings


def test_callee_reading_its_argument_is_silent(run_script):
    res = run_script(PERTURB.replace("CALLBACK", READS))
    assert res.code == 0, res.err
    assert not res.findings, res.findings


@pytest.mark.parametrize("src", [PERTURB.replace("CALLBACK", STARRED),
                                 UNUSED.replace("CALLBACK", IGNORES)],
                         ids=["starred_callee", "input_never_used"])
def test_other_unused_inputs_keep_the_grad_line(run_script, src):
    res = run_script(src)
    assert res.code != 0
    assert [(f["code"], f["line"]) for f in res.findings][:1] == \
        [("GT702", marked_line(src, "# <- crash"))], res.findings


PLAIN = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class FocalLoss(nn.Module):
    def __init__(self, gamma=2.0):
        super().__init__()
        self.gamma = gamma

    def forward(self, logits, labels):
        ce = F.cross_entropy(logits, labels, reduction="none")
        return ((1 - torch.exp(-ce)) ** self.gamma * ce).mean()


LOGITS
labels = torch.randint(0, 5, (8,))
loss = FocalLoss()(logits, labels)
loss.backward()  # <- crash
print(loss.item())
"""


def test_loss_of_plain_tensors_named_where_the_input_is_made(run_script):
    src = PLAIN.replace("LOGITS", "logits = torch.rand(8, 5)  # <- cause")
    res = run_script(src)
    assert res.code != 0
    assert [(f["code"], f["line"]) for f in res.findings][:1] == \
        [("GT800", marked_line(src))], res.findings


def test_loss_of_an_input_that_requires_grad_is_silent(run_script):
    res = run_script(PLAIN.replace("LOGITS", "logits = torch.rand(8, 5, requires_grad=True)"))
    assert res.code == 0, res.err
    assert not res.findings, res.findings


TWO = """
import torch
import torch.nn.functional as F
pred = torch.rand(8, 3)
target = torch.rand(8, 3)
loss = F.mse_loss(pred, target)
loss.backward()  # <- crash
"""
DETACHED = """
import torch
import torch.nn as nn
import torch.nn.functional as F
net = nn.Linear(3, 3)
x = torch.rand(8, 3)
pred = net(x).detach()  # <- cause
loss = F.mse_loss(pred, torch.rand(8, 3))
loss.backward()
"""


def test_two_plain_inputs_keep_the_backward_line(run_script):
    res = run_script(TWO)
    assert res.code != 0
    assert [(f["code"], f["line"]) for f in res.findings][:1] == \
        [("GT800", marked_line(TWO, "# <- crash"))], res.findings


def test_detached_model_output_keeps_the_cut(run_script):
    res = run_script(DETACHED)
    assert res.code != 0
    assert res.findings[0]["line"] == marked_line(DETACHED), res.findings


REINFORCE = """
import torch
import torch.nn as nn
from torch.distributions import Normal
torch.manual_seed(0)
policy = nn.Linear(3, 2)
opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
for episode in range(2):
    log_probs, rewards = [], []
    for t in range(5):
        mu = policy(torch.randn(3))
        dist = Normal(mu, torch.ones(2))
        action = dist.sample()
        log_probs.append(dist.log_prob(action).sum())
        rewards.append(float(-action.abs().sum()))
    returns = torch.tensor(rewards).flip(0).cumsum(0).flip(0)
    LOSS
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
MEAN_FIRST = """lp = torch.stack(log_probs).mean()  # <- cause
    loss = -torch.sum(lp * returns)"""
PAIRED = """loss = -torch.sum(torch.stack(log_probs) * returns)"""
SCALAR = """loss = -(torch.stack(log_probs).mean() * torch.tensor(0.5)).sum()"""
OTHER_SHAPE = """loss = -(torch.stack(log_probs).mean() * returns[:3]).sum()"""
WITH_GRAPH = """lp = torch.stack(log_probs)
    loss = -(lp.mean() * lp.exp()).sum()"""


def test_reduced_before_paired_named_at_the_reduction(run_script):
    src = REINFORCE.replace("LOSS", MEAN_FIRST)
    res = run_script(src)
    assert res.code == 0, res.err
    assert [(f["code"], f["line"]) for f in res.findings][:1] == \
        [("GT861", marked_line(src))], res.findings


@pytest.mark.parametrize("body", [PAIRED, SCALAR, OTHER_SHAPE, WITH_GRAPH],
                         ids=["paired", "scalar_weight", "other_shape", "weight_with_graph"])
def test_reduced_before_paired_look_alikes_silent(run_script, body):
    res = run_script(REINFORCE.replace("LOSS", body))
    assert res.code == 0, res.err
    assert "GT861" not in res.codes(), res.findings


WITH_OPT = PLAIN.replace("LOGITS", """w = torch.zeros(5, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.1)
logits = torch.rand(8, 5)""")
WRAPPED = """
import torch


def rotate(v):
    out = torch.Tensor._make_subclass(torch.Tensor, torch.cos(v).detach())
    return out * 2


def fit(vec):
    d = rotate(vec)
    loss = torch.sum(d ** 2)
    loss.backward()  # <- crash


fit(torch.randn(2, 3, requires_grad=True))
"""


@pytest.mark.parametrize("src", [WITH_OPT, WRAPPED], ids=["optimizer_built", "trainable_behind"])
def test_plain_loss_not_claimed_when_something_trains(run_script, src):
    res = run_script(src)
    assert res.code != 0
    assert res.findings and res.findings[0]["line"] != marked_line(src, "logits = torch.rand") \
        if "logits" in src else res.findings[0]["line"] != marked_line(src, "d = rotate"), \
        res.findings
