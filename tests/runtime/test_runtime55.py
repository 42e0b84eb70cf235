"""runtime55 on real torch, one process, a few steps, tiny models: the cause's line first.

- NOTE [state kept on an attribute], widened: the freed graph reaches this iteration through
  ``self.<attr>`` although the attribute's own node was made at another line than the freed one
  (a neuron computing ``h`` then ``v`` and keeping ``self.v = v``, a recurrent cell's state
  passed through ``tanh``, a plain state holder that is no module); a ``reset`` method storing a
  constant is no second store. Look-alikes: the state detached when stored, the reset called.
- NOTE [hook input needs no grad]: a module backward hook (full or not) reading its
  ``grad_input`` entry of an input that needs no grad: named where the program made that input
  (a loop's batch, a helper's result, a numpy conversion). Look-alikes: the input made to
  require grad.
"""
from __future__ import annotations

import pytest

from tests.runtime.rt_helpers import marked_line

torch = pytest.importorskip("torch")

HEAD = """
import torch
from torch import nn
torch.manual_seed(0)
"""

# ---- GT506: the carried state kept on an attribute, made at another line than the freed node ---

NEURON = """
class Neuron(nn.Module):
    def __init__(self):
        super().__init__()
        self.v = 0.0

    def reset(self):
        self.v = 0.0

    def forward(self, x_seq):
        v = self.v
        outs = []
        for t in range(x_seq.shape[0]):
            h = v + (x_seq[t] - v) / 2.0
            s = torch.sigmoid(h - 1.0)
            v = h * (1.0 - s)
            outs.append(s)
        STORE
        return torch.stack(outs)


net = nn.Sequential(nn.Linear(3, 3), Neuron())
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    loss = net(torch.randn(4, 2, 3)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    RESET
"""

CELL = """
class Memory(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(3, 4)
        self.state = None

    def reset_state(self):
        self.state = None

    def forward(self, x):
        prev = self.state if self.state is not None else torch.zeros(x.shape[0], 4)
        out = self.cell(x, prev)
        squashed = torch.tanh(out)
        STORE
        return out


mem = Memory()
opt = torch.optim.Adam(mem.parameters(), lr=1e-3)


def train_step(x):
    loss = mem(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    RESET


for _ in range(3):
    train_step(torch.randn(2, 3))
"""

HOLDER = """
class Smoother:
    def __init__(self):
        self.level = torch.zeros(4)

    def update(self, x):
        scaled = self.level * 0.5
        mixed = scaled + x.mean(0)
        STORE
        return mixed


lin = nn.Linear(3, 4)
smooth = Smoother()
opt = torch.optim.SGD(lin.parameters(), lr=0.1)
for _ in range(3):
    loss = smooth.update(lin(torch.randn(5, 3))).pow(2).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    RESET
"""

CARRIED = {
    "neuron": (NEURON, "self.v = v", "self.v = v.detach()", "net[1].reset()"),
    "cell": (CELL, "self.state = squashed", "self.state = squashed.detach()",
             "mem.reset_state()"),
    "holder": (HOLDER, "self.level = mixed * 0.9", "self.level = (mixed * 0.9).detach()",
               "smooth.level = torch.zeros(4)"),
}


def _fill(name: str, store: str, reset: str) -> str:
    body = CARRIED[name][0].replace("STORE", store).replace("RESET", reset)
    return HEAD + body


@pytest.mark.parametrize("name", sorted(CARRIED))
def test_carried_attribute_named_at_its_store(name, run_script):
    _, store, _, _ = CARRIED[name]
    src = _fill(name, store + "  # <- cause", "pass")
    res = run_script(src)
    first = res.findings[0] if res.findings else None
    assert first and (first["code"], first["line"]) == ("GT506", marked_line(src)), res.findings


@pytest.mark.parametrize("name,variant", [(n, v) for n in sorted(CARRIED) for v in (2, 3)])
def test_carried_attribute_lookalikes_silent(name, variant, run_script):
    _, store, detached, reset = CARRIED[name]
    src = _fill(name, detached, "pass") if variant == 2 else _fill(name, store, reset)
    res = run_script(src)
    assert res.code == 0, res.err
    assert res.findings == [], res.findings


# ---- GT801: a module backward hook reads the gradient of an input that needs none ------------

HOOKED = {
    # a closure registered as a full backward hook on the first layer; batches from a list
    "closure_loader": """
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
norms = []


def record(mod, grad_input, grad_output):
    norms.append(grad_input[0].norm())


model[0].register_full_backward_hook(record)
batches = [torch.randn(3, 4) for _ in range(2)]
for x in batches:  # <- cause
    PREP
    model(x).sum().backward()
print(len(norms))
""",
    # a saliency class hooking a conv inside a custom module; the input made by a helper
    "class_helper": """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3)
        self.head = nn.Linear(2, 3)

    def forward(self, x):
        return self.head(self.conv(x).mean(dim=(2, 3)))


class Saliency:
    def __init__(self, net):
        self.net, self.grad = net, None
        net.conv.register_full_backward_hook(self.keep)

    def keep(self, module, gin, gout):
        self.grad = gin[0].clone()

    def explain(self, image):
        self.net(image)[0, 1].backward()
        return self.grad


def load_image():
    return torch.rand(1, 1, 6, 6)


picture = load_image()  # <- cause
PREP
print(Saliency(Net()).explain(picture).shape)
""",
    # the older `register_backward_hook` on a Linear: its grad_input follows addmm's inputs
    # (bias, input, weight), so the input's entry is the second; the input from numpy
    "old_hook_numpy": """
import numpy as np

lin = nn.Linear(3, 2)
seen = []


def spy(module, gin, gout):
    seen.append(gin[1].abs().sum())


def to_tensor(arr):
    return torch.from_numpy(arr).float()


lin.register_backward_hook(spy)
feats = to_tensor(np.ones((4, 3)))  # <- cause
PREP
lin(feats).sum().backward()
print(seen)
""",
}

HOOKED_PREP = {"closure_loader": "x.requires_grad_()", "class_helper": "picture.requires_grad_()",
               "old_hook_numpy": "feats.requires_grad_()"}


@pytest.mark.parametrize("name", sorted(HOOKED))
def test_hook_input_without_grad_named_where_made(name, run_script):
    src = HEAD + HOOKED[name].replace("PREP", "pass")
    res = run_script(src)
    first = res.findings[0] if res.findings else None
    assert first and (first["code"], first["line"]) == ("GT801", marked_line(src)), res.findings


@pytest.mark.parametrize("name", sorted(HOOKED))
def test_hook_input_with_grad_silent(name, run_script):
    res = run_script(HEAD + HOOKED[name].replace("PREP", HOOKED_PREP[name]))
    assert res.code == 0, res.err
    # the non-full hook keeps its own true finding (GT857: torch warns it is deprecated)
    allowed = {"GT857"} if name == "old_hook_numpy" else set()
    assert set(res.codes()) <= allowed, res.findings
