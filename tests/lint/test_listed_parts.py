"""GT462: parameter groups listed submodule by submodule leave out a part the model runs. The
buggy twins are also trained on torch: the left-out part gets a gradient and never changes."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

PRELUDE = """\
import torch
import torch.nn as nn
torch.manual_seed(0)
"""
TRAIN = """
for _ in range(3):
    opt.zero_grad()
    model(torch.randn(4, 8)).pow(2).mean().backward()
    opt.step()
"""


def _found(body: str) -> tuple[list[int], str]:
    src = PRELUDE + textwrap.dedent(body)
    return [f.line for f in check_source(src, path="case.py", select=["GT462"])], src


def _marked(src: str) -> int:
    return next(i for i, line in enumerate(src.splitlines(), 1) if line.endswith("# HERE"))


# a model of three parts, all run by forward
NET = """
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Linear(8, 8)
            self.gate = nn.Linear(8, 8)
            self.head = nn.Linear(8, 2)
        def forward(self, x):
            return self.head(self.encoder(x) * torch.sigmoid(self.gate(x)))
    model = Net()"""

BUGS = [
    # the twin of the look-alikes below: the gate left out
    (NET + """
    opt = torch.optim.SGD([{"params": model.encoder.parameters()},  # HERE
                           {"params": model.head.parameters()}], lr=0.1)
    """, "gate"),
    # a method builds the groups from the model it is given; the gate is built under an `if`
    ("""
    class Net(nn.Module):
        def __init__(self, gated=True):
            super().__init__()
            self.encoder = nn.Linear(8, 8)
            self.head = nn.Linear(8, 2)
            if gated:
                self.gate = nn.Linear(8, 8)
        def get_optim(self, model, lr):
            return torch.optim.SGD([{"params": model.encoder.parameters()},  # HERE
                                    {"params": model.head.parameters()}], lr=lr)
        def forward(self, x):
            return self.head(self.encoder(x) * torch.sigmoid(self.gate(x)))
    model = Net()
    opt = model.get_optim(model, 0.1)
    """, "gate"),
    # a subclass adds a layer; the base's group method is inherited
    ("""
    class Base(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Linear(8, 8)
            self.head = nn.Linear(8, 2)
        def groups(self):
            return [{"params": self.encoder.parameters()},  # HERE
                    {"params": self.head.parameters(), "lr": 0.01}]
        def forward(self, x):
            return self.head(self.encoder(x))
    class Wider(Base):
        def __init__(self):
            super().__init__()
            self.extra = nn.Linear(8, 8)
        def forward(self, x):
            return self.head(self.extra(torch.relu(self.encoder(x))))
    model = Wider()
    opt = torch.optim.Adam(model.groups(), lr=0.1)
    """, "extra"),
    # a script: starred parameters() of two parts, a plain Parameter left out
    ("""
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Linear(8, 8)
            self.head = nn.Linear(8, 2)
            self.scale = nn.Parameter(torch.ones(8))
        def forward(self, x):
            return self.head(self.encoder(x) * self.scale)
    model = Net()
    opt = torch.optim.SGD([*model.encoder.parameters(), *model.head.parameters()], lr=0.1)  # HERE
    """, "scale"),
]

LOOK_ALIKES = [
    # every part listed
    NET + """
    opt = torch.optim.SGD([{"params": model.encoder.parameters()},
                           {"params": model.gate.parameters(), "lr": 0.01},
                           {"params": model.head.parameters()}], lr=0.1)
    """,
    # the rest collected from the whole model's parameters
    NET + """
    listed = set(map(id, model.encoder.parameters())) | set(map(id, model.head.parameters()))
    rest = [p for p in model.parameters() if id(p) not in listed]
    opt = torch.optim.SGD([{"params": model.encoder.parameters()},
                           {"params": model.head.parameters()}, {"params": rest}], lr=0.1)
    """,
    # the left-out part is frozen on purpose
    NET + """
    model.gate.requires_grad_(False)
    opt = torch.optim.SGD([{"params": model.encoder.parameters()},
                           {"params": model.head.parameters()}], lr=0.1)
    """,
    # another optimizer trains it (a GAN-style split)
    NET + """
    opt = torch.optim.SGD([{"params": model.encoder.parameters()},
                           {"params": model.head.parameters()}], lr=0.1)
    opt_gate = torch.optim.Adam(model.gate.parameters(), lr=1e-3)
    """,
    # a fixed Parameter made with requires_grad=False
    """
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Linear(8, 8)
            self.head = nn.Linear(8, 2)
            self.mask = nn.Parameter(torch.ones(8), requires_grad=False)
        def forward(self, x):
            return self.head(self.encoder(x) * self.mask)
    model = Net()
    opt = torch.optim.SGD([{"params": model.encoder.parameters()},
                           {"params": model.head.parameters()}], lr=0.1)
    """,
    # the subclass overrides the group method
    """
    class Base(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Linear(8, 8)
            self.head = nn.Linear(8, 2)
        def groups(self):
            return [{"params": self.encoder.parameters()}, {"params": self.head.parameters()}]
        def forward(self, x):
            return self.head(self.encoder(x))
    class Wider(Base):
        def __init__(self):
            super().__init__()
            self.extra = nn.Linear(8, 8)
        def groups(self):
            return super().groups() + [{"params": self.extra.parameters()}]
        def forward(self, x):
            return self.head(self.extra(torch.relu(self.encoder(x))))
    model = Wider()
    opt = torch.optim.Adam(model.groups(), lr=0.1)
    """,
]


@pytest.mark.parametrize("body,missing", BUGS)
def test_left_out_part_reported_and_never_changes(body, missing):
    lines, src = _found(body)
    assert lines == [_marked(src)]
    ns: dict = {}
    exec(compile(src + TRAIN, "case.py", "exec"), ns)
    left = getattr(ns["model"], missing)
    p = left if isinstance(left, torch.nn.Parameter) else left.weight
    before = p.detach().clone()
    exec(compile(TRAIN, "case.py", "exec"), ns)
    assert p.grad is not None and p.grad.abs().sum() > 0
    assert torch.equal(p, before)


@pytest.mark.parametrize("body", LOOK_ALIKES)
def test_look_alike_is_silent(body):
    lines, src = _found(body)
    assert lines == []
    exec(compile(src + TRAIN, "case.py", "exec"), {})
