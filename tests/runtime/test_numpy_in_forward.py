"""Tensors of one pass reduced with numpy inside a module's forward (NOTE [numpy inside
forward]): the conversion leads, not the list's append (which leads for a loss history kept
for plotting, the other twin). Real torch, in-process."""
from __future__ import annotations

import pytest

HEAD = """
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
"""

BUGS = {
    # layer outputs collected in a list and averaged with np.mean inside forward
    "np_mean_of_layer_outputs": """
class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))

    def forward(self, x):
        outs = []
        for layer in self.layers:
            x = torch.tanh(layer(x))
            outs.append(x)
        return np.mean(outs, axis=0)  # C

net = Stack()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
loss = torch.as_tensor(net(torch.randn(2, 4))).pow(2).mean()
loss.backward()
""",
    # np.stack of per-head scores, assigned then returned
    "np_stack_of_heads": """
class Heads(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleList(nn.Linear(4, 1) for _ in range(2))

    def forward(self, x):
        scores = [h(x) for h in self.heads]
        scores = np.stack(scores, axis=1)  # C
        return scores

m = Heads()
out = m(torch.randn(3, 4))
""",
}

LOOKALIKES = {
    # the same reduction written with torch
    "torch_stack_mean": """
class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))

    def forward(self, x):
        outs = []
        for layer in self.layers:
            x = torch.tanh(layer(x))
            outs.append(x)
        return torch.stack(outs).mean(0)

net = Stack()
loss = net(torch.randn(2, 4)).pow(2).mean()
loss.backward()
""",
    # a forward that logs detached copies with numpy, training on the tensors
    "numpy_of_detached_copies": """
class Logged(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.seen = []

    def forward(self, x):
        y = self.fc(x)
        self.seen.append(y.detach())
        self.mean_seen = float(np.mean(np.stack([s.numpy() for s in self.seen])))
        return y

m = Logged()
m(torch.randn(2, 4)).sum().backward()
""",
}


def _line(src: str) -> int:
    return next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))


@pytest.mark.parametrize("name", sorted(BUGS))
def test_conversion_leads(run_script, name):
    src = (HEAD + BUGS[name]).lstrip("\n")
    res = run_script(src)
    assert res.code != 0 and res.findings, res.err
    assert (res.findings[0]["code"], res.findings[0]["line"]) == ("GT807", _line(src)), \
        res.findings


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalike_runs_clean(run_script, name):
    res = run_script((HEAD + LOOKALIKES[name]).lstrip("\n"))
    assert res.code == 0 and not res.findings, res.findings
