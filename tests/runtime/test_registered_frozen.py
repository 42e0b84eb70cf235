"""torch.autograd.grad asked about a Parameter registered with requires_grad=False (NOTE
[registered frozen]): the registration leads, not the autograd.grad call; look-alikes (the
frozen one filtered out, unfrozen before) run clean. Real torch, in-process."""
from __future__ import annotations

import pytest

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
"""

BUGS = {
    # register_parameter of a frozen scale, gradients taken in a helper over parameters()
    "register_parameter_in_init": """
class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.register_parameter("scale", nn.Parameter(torch.ones(3), requires_grad=False))  # C

    def forward(self, x):
        return self.fc(x) * self.scale

def inner_step(model, x):
    loss = model(x).pow(2).mean()
    return torch.autograd.grad(loss, list(model.parameters()), create_graph=True)

inner_step(Scaled(), torch.randn(2, 3))
""",
    # parameters made in a loop, only the first trainable, assigned by setattr
    "setattr_in_loop": """
class Mix(nn.Module):
    def __init__(self):
        super().__init__()
        for i in range(2):
            setattr(self, f"w{i}", nn.Parameter(torch.randn(2, 2), requires_grad=(i == 0)))  # C

    def forward(self, x):
        return x @ self.w0 + x @ self.w1

m = Mix()
out = m(torch.randn(4, 2)).sum()
gw = torch.autograd.grad(out, [m.w0, m.w1])
""",
}

LOOKALIKES = {
    # the frozen parameter is filtered out of the inputs
    "frozen_filtered_out": """
class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.scale = nn.Parameter(torch.ones(3), requires_grad=False)

    def forward(self, x):
        return self.fc(x) * self.scale

m = Scaled()
loss = m(torch.randn(2, 3)).pow(2).mean()
grads = torch.autograd.grad(loss, [p for p in m.parameters() if p.requires_grad])
""",
    # registered frozen, switched on before the gradients are taken
    "unfrozen_before_grad": """
class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.scale = nn.Parameter(torch.ones(3), requires_grad=False)

    def forward(self, x):
        return self.fc(x) * self.scale

m = Scaled()
m.scale.requires_grad_(True)
loss = m(torch.randn(2, 3)).pow(2).mean()
grads = torch.autograd.grad(loss, list(m.parameters()))
""",
}


def _line(src: str) -> int:
    return next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))


@pytest.mark.parametrize("name", sorted(BUGS))
def test_registration_leads(run_script, name):
    src = (HEAD + BUGS[name]).lstrip("\n")
    res = run_script(src)
    assert res.code != 0 and res.findings, res.err
    assert (res.findings[0]["code"], res.findings[0]["line"]) == ("GT702", _line(src)), \
        res.findings


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalike_runs_clean(run_script, name):
    res = run_script((HEAD + LOOKALIKES[name]).lstrip("\n"))
    assert res.code == 0 and not res.findings, res.findings
