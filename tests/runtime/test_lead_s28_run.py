"""Session 28, the lead: a helper that returns what it is handed, detached, names its caller.

NOTE [grad-free wrapper] (runtime/trace/detach_wrapper.py), widened: ``return x.detach()...``
on a parameter ``x`` of a function other than ``forward``/``__call__`` (a ``detach_to_cpu`` that
maps itself over dicts and lists, a ``to_host``, a logger's ``snapshot``) is a helper whose
purpose is to leave the graph; the slip is the call that handed it the loss (ride PR#12). A
helper that detaches a value it computed, or hands a detached input on to a computation of its
own, keeps its own line. Real torch: every bug below crashes at backward().
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

TO_HOST = """
def to_host(obj):
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, (list, tuple)):
        return [to_host(o) for o in obj]
    if isinstance(obj, dict):
        return {k: to_host(v) for k, v in obj.items()}
    return obj
"""

CALLER_BUGS = {
    # a step method returns its outputs through the recursive helper, the loss included
    "dict_through_recursive_helper": TO_HOST + """
class Module(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 2)

    def step(self, x, y):
        out = self.fc(x)
        loss = F.cross_entropy(out, y)
        return to_host({"loss": loss, "logits": out})  # <- cause


m = Module()
opt = torch.optim.SGD(m.parameters(), lr=0.1)
res = m.step(torch.randn(4, 5), torch.randint(0, 2, (4,)))
opt.zero_grad()
res["loss"].backward()
opt.step()
""",
    # the same helper over a list, from the training loop
    "list_through_recursive_helper": TO_HOST + """
net = nn.Linear(3, 1)
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
for _ in range(2):
    x, y = torch.randn(6, 3), torch.randn(6, 1)
    pred = net(x)
    loss, mae = to_host([F.mse_loss(pred, y), (pred - y).abs().mean()])  # <- cause
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    # a plain logger method that snapshots what it is given, applied to the loss itself
    "logger_snapshot_of_the_loss": """
class History:
    def __init__(self):
        self.items = []

    def snapshot(self, value):
        return value.detach().clone()


hist = History()
net = nn.Linear(4, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
loss = net(torch.randn(8, 4)).pow(2).mean()
loss = hist.snapshot(loss)  # <- cause
opt.zero_grad()
loss.backward()
""",
}

OWN_LINE_BUGS = {
    # the helper detaches a value it computed: its own line is the slip
    "helper_detaches_its_own_result": """
def predict(net, x):
    out = net(x)
    return out.detach()  # <- cause


net = nn.Linear(4, 1)
loss = predict(net, torch.randn(3, 4)).pow(2).mean()
loss.backward()
""",
    # the helper hands the detached input on to its own computation
    "helper_computes_on_a_detached_input": """
def mse(pred, target):
    return F.mse_loss(pred.detach(), target)  # <- cause


net = nn.Linear(4, 1)
loss = mse(net(torch.randn(3, 4)), torch.randn(3, 1))
loss.backward()
""",
}

LOOKALIKES = {
    # the recursive helper only copies what is logged; the loss is backpropagated as is
    "helper_for_logging_only": TO_HOST + """
net = nn.Linear(3, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
logs = []
for _ in range(3):
    x, y = torch.randn(6, 3), torch.randn(6, 1)
    pred = net(x)
    loss = F.mse_loss(pred, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    logs.append(to_host({"loss": loss, "pred": pred}))
print(len(logs))
""",
}


def _first_run(res):
    found = [f for f in res.findings if f["source"] != "static"]
    assert found, res.err
    return found[0]


@pytest.mark.parametrize("name", sorted(CALLER_BUGS))
def test_detaching_helper_names_the_call_that_handed_it_the_loss(run_script, name):
    src = HEAD + CALLER_BUGS[name]
    res = run_script(src)
    assert res.code != 0, res.err  # real torch: backward() of a tensor without grad_fn
    f = _first_run(res)
    assert (f["code"], f["line"]) == ("GT107", marked_line(src)), res.err
    assert any("detaches its input here" in r["message"] for r in f["related"]), f
    assert "which detaches what it is handed" in f["fix"]["title"], f


@pytest.mark.parametrize("name", sorted(OWN_LINE_BUGS))
def test_helper_that_detaches_its_own_value_keeps_its_line(run_script, name):
    src = HEAD + OWN_LINE_BUGS[name]
    res = run_script(src)
    assert res.code != 0, res.err
    f = _first_run(res)
    assert (f["code"], f["line"]) == ("GT107", marked_line(src)), res.err


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_detaching_helper_used_for_logging_is_silent(run_script, name):
    res = run_script(HEAD + LOOKALIKES[name])
    assert res.code == 0, res.err
    assert not [f for f in res.findings if f["source"] != "static"], res.findings


# NOTE [gradients summed outside the optimizer]: a training function run twice builds a new
# model and a new optimizer; a recurrent cell used at every time step bumps its gradient's
# version within one backward(). Nothing of the new model was stepped before: silent.
RUN_TWICE = """
class Cell(nn.Module):
    def __init__(self):
        super().__init__()
        self.i2h = nn.Linear(6, 4)
        self.out = nn.Linear(4, 1)

    def forward(self, xs):
        h = xs.new_zeros(xs.size(1), 4)
        for t in range(xs.size(0)):
            h = torch.tanh(self.i2h(torch.cat([xs[t], h], 1)))
        return self.out(h)


def train(seed):
    torch.manual_seed(seed)
    model = Cell()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(3):
        opt.zero_grad()
        loss = F.mse_loss(model(torch.randn(5, 3, 2)), torch.randn(3, 1))
        loss.backward()
        opt.step()
    return model.out.weight.detach()


print(torch.equal(train(0), train(0)))
"""


def test_second_run_of_a_training_function_is_not_summed_gradients(run_script):
    res = run_script(HEAD + RUN_TWICE)
    assert res.code == 0, res.err
    assert not [f for f in res.findings if f["source"] != "static"], res.findings
