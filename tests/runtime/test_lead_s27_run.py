"""Session-27 lead, run-time (docs/triage/lead27.md).

- NOTE [gradient replaced through another input]: a straight-through Function returns None for
  one input on purpose when every leaf behind it is reached through an input that does get the
  gradient (pytti's ``replace_grad(dists, torch.maximum(dists, stops))``, a rounding passed
  straight through): no GT845. A None for an input with a leaf of its own still is one.
"""
from __future__ import annotations

import pytest
from rt_helpers import marked_line

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class ReplaceGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x_forward, x_backward):
        ctx.shape = x_backward.shape
        return x_forward

    @staticmethod
    def backward(ctx, grad_in):
        return None, grad_in.sum_to_size(ctx.shape)  # <- cause


replace_grad = ReplaceGrad.apply
net = nn.Linear(8, 4)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
"""


def _run(res):
    return [f for f in res.findings if f["source"] != "static"]


STRAIGHT_THROUGH = {
    # pytti: the backward input computed from the forward input
    "backward_input_from_forward_input": """
for _ in range(3):
    d = net(torch.randn(5, 8)).pow(2).sum(1)
    out = replace_grad(d, torch.maximum(d, torch.zeros_like(d)))
    opt.zero_grad()
    out.mean().backward()
    opt.step()
""",
    # variant: the forward input computed from the backward input (a rounding passed through)
    "forward_input_from_backward_input": """
for _ in range(3):
    z = net(torch.randn(5, 8))
    q = torch.round(z * 4) / 4
    out = replace_grad(q, z)
    opt.zero_grad()
    F.mse_loss(out, torch.randn(5, 4)).backward()
    opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(STRAIGHT_THROUGH))
def test_straight_through_function_is_silent(run_script, name):
    res = run_script(HEAD + STRAIGHT_THROUGH[name])
    assert res.code == 0, res.err
    assert [f["code"] for f in _run(res)] == [], res.err


def test_none_for_an_input_with_its_own_leaf_is_named(run_script):
    # the forward input is a parameter of its own (a learned offset) that nothing else reaches
    src = HEAD + """
offset = nn.Parameter(torch.zeros(5, 4))
opt.add_param_group({"params": [offset]})
for _ in range(3):
    z = net(torch.randn(5, 8))
    out = replace_grad(z + offset, z)
    opt.zero_grad()
    F.mse_loss(out, torch.randn(5, 4)).backward()
    opt.step()
"""
    res = run_script(src)
    found = _run(res)
    assert found and found[0]["code"] == "GT845", res.err
    assert found[0]["line"] == marked_line(src), res.err


# -- NOTE [hand-made leaf left out of the optimizer] --------------------------------------------
LEAVES = """
import torch

torch.manual_seed(0)
w1 = torch.randn(6, 8, requires_grad=True)
w2 = torch.randn(8, 3, requires_grad=True)
v1 = torch.randn(8, 8, requires_grad=True)


def forward(x):
    h = torch.tanh(x @ w1)
    h = torch.tanh(h @ v1)
    return h @ w2


def train(steps=4):
    params = [w1, w2]  # <- cause
    opt = torch.optim.Adam(params, lr=0.01)
    for _ in range(steps):
        x, y = torch.randn(5, 6), torch.randn(5, 3)
        loss = ((forward(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


train()
"""


def test_hand_made_leaf_left_out_of_the_list_is_named(run_script):
    res = run_script(LEAVES)
    found = _run(res)
    assert found and found[0]["code"] == "GT821", res.err
    assert found[0]["line"] == marked_line(LEAVES), res.err
    assert "`v1`" in found[0]["message"]


def test_hand_made_leaf_left_out_of_an_inline_list_names_the_constructor(run_script):
    # variant: the list given inline, in a class's method
    src = LEAVES.replace("    params = [w1, w2]  # <- cause\n", "").replace(
        "    opt = torch.optim.Adam(params, lr=0.01)",
        "    opt = torch.optim.Adam([w1, w2], lr=0.01)  # <- cause")
    res = run_script(src)
    found = _run(res)
    assert found and found[0]["code"] == "GT821", res.err
    assert found[0]["line"] == marked_line(src), res.err


LEAF_OK = {
    "every_leaf_listed": LEAVES.replace("params = [w1, w2]  # <- cause", "params = [w1, w2, v1]"),
    # the third weight updated by hand after each step
    "leaf_updated_by_hand": LEAVES.replace(
        "        opt.step()\n",
        "        opt.step()\n        with torch.no_grad():\n            v1.sub_(0.01 * v1.grad)\n"),
    # an input made per batch that requires grad (an adversarial step), not a weight
    "input_leaf_per_batch": LEAVES.replace("params = [w1, w2]  # <- cause",
                                           "params = [w1, w2, v1]").replace(
        "        x, y = torch.randn(5, 6), torch.randn(5, 3)\n",
        "        x, y = torch.randn(5, 6).requires_grad_(), torch.randn(5, 3)\n"),
}


@pytest.mark.parametrize("name", sorted(LEAF_OK))
def test_hand_made_leaves_look_alikes_are_silent(run_script, name):
    res = run_script(LEAF_OK[name])
    assert res.code == 0, res.err
    assert [f["code"] for f in _run(res)] == [], res.err


# -- NOTE [extra step outside the accumulation condition] ---------------------------------------
ACCUM = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Linear(6, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
batches = [(torch.randn(4, 6), torch.randn(4, 2)) for _ in range(12)]
for i, (x, y) in enumerate(batches):
    loss = F.mse_loss(model(x), y) / 4
    loss.backward()
    if (i + 1) % 4 == 0:
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
    optimizer.step()  # <- cause
"""

ACCUM_CLASS = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Trainer:
    def __init__(self):
        self.net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2))
        self.opt = torch.optim.Adam(self.net.parameters(), lr=1e-3)

    def fit(self, batches, accum=3):
        step = 0
        while step < len(batches):
            x, y = batches[step]
            F.mse_loss(self.net(x), y).backward()
            step += 1
            if step % accum == 0:
                self.opt.step()
                self.opt.zero_grad(set_to_none=True)
            self.opt.step()  # <- cause


Trainer().fit([(torch.randn(4, 6), torch.randn(4, 2)) for _ in range(9)])
"""


@pytest.mark.parametrize("src", [ACCUM, ACCUM_CLASS], ids=["script", "method_while"])
def test_extra_step_outside_the_accumulation_condition_is_named(run_script, src):
    res = run_script(src)
    found = _run(res)
    assert found and found[0]["code"] == "GT501", res.err
    assert found[0]["line"] == marked_line(src), res.err


ACCUM_OK = {
    "guarded_step_only": ACCUM.replace("    optimizer.step()  # <- cause\n", ""),
    # a second optimizer stepped on every batch (its own gradients cleared) is not the extra
    "other_optimizer_each_batch": ACCUM.replace(
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)\n",
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)\n"
        "head = nn.Linear(2, 2)\nhead_opt = torch.optim.SGD(head.parameters(), lr=0.1)\n").replace(
        "    loss = F.mse_loss(model(x), y) / 4\n",
        "    loss = F.mse_loss(head(model(x)), y) / 4\n").replace(
        "    optimizer.step()  # <- cause\n", "    head_opt.step()\n    head_opt.zero_grad()\n"),
}


@pytest.mark.parametrize("name", sorted(ACCUM_OK))
def test_accumulation_look_alikes_are_silent(run_script, name):
    res = run_script(ACCUM_OK[name])
    assert res.code == 0, res.err
    assert [f["code"] for f in _run(res)] == [], res.err


# -- NOTE [accumulated means not scaled]: gradients divided after the fact ----------------------
UNSCALED = ACCUM.replace("    loss = F.mse_loss(model(x), y) / 4\n",
                         "    loss = F.mse_loss(model(x), y)\n").replace(
    "    optimizer.step()  # <- cause\n", "")


def test_unscaled_accumulation_still_named(run_script):
    res = run_script(UNSCALED)
    assert [f["code"] for f in _run(res)] == ["GT513"], res.err


@pytest.mark.parametrize("scale", ["p.grad /= 4", "p.grad.data.div_(4)", "p.grad.mul_(0.25)"])
def test_gradients_divided_in_place_before_the_step_are_silent(run_script, scale):
    # ECO's accumulation: the loss is not divided, every .grad is before the step
    src = UNSCALED.replace(
        "        nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n",
        "        for p in model.parameters():\n            " + scale + "\n"
        "        nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n")
    res = run_script(src)
    assert res.code == 0, res.err
    assert [f["code"] for f in _run(res)] == [], res.err


# -- the saved tensor backward() failed on, when two of one shape were written in place ---------
# Both writes broke a saved tensor: the earliest is named, and the op named as its saver is that
# write's own norm: NOTE [first write that broke a saved tensor].
TWO_WRITES = """
import torch

conf = torch.randn(4, 3, requires_grad=True)
a = conf[1:] - conf[:-1]
a /= torch.norm(a, dim=1).unsqueeze(1)  # <- cause
b = conf[:-1] - conf[1:] * 2
b /= torch.norm(b, dim=1).unsqueeze(1)
((a * b).sum(1) ** 2).sum().backward()
"""


def test_two_tensors_of_one_shape_written_in_place_name_the_failing_saver(run_script):
    res = run_script(TWO_WRITES)
    found = _run(res)
    assert found and found[0]["code"] == "GT602", res.err
    line = marked_line(TWO_WRITES)
    assert found[0]["line"] == line, res.err
    saved = [r["line"] for r in found[0]["related"] if "saved it for backward" in r["message"]]
    assert saved == [line], res.err
