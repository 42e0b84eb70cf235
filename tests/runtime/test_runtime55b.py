"""runtime55b on real torch, one process, a few steps, tiny models: the cause's line first.

- NOTE [layer stored past registration]: a layer written into the instance ``__dict__`` (a
  constant key, ``object.__setattr__`` in a loop read back with ``getattr``, ``vars(self)[name]``
  in a helper method, a block whose inner layers are the ones that ran) is called by ``forward``
  and never stepped: GT401 at the store, not at the call. Look-alikes: a teacher hidden from
  ``parameters()`` that way on purpose (frozen, run under no_grad), the stored head handed to
  the optimizer explicitly, layers registered with ``setattr``.
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

LOOP = """
x, y = torch.randn(16, 4), torch.randn(16, 2)
for _ in range(3):
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
"""

STORED = {
    "dict_constant_key": """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.__dict__["head"] = nn.Linear(8, 2)  # <- cause

    def forward(self, x):
        return self.head(torch.relu(self.body(x)))


model = Net()
opt = torch.optim.SGD(OPT_PARAMS, lr=0.1)
""",
    "object_setattr_loop": """
class MultiHead(nn.Module):
    def __init__(self, names):
        super().__init__()
        self.names = names
        self.trunk = nn.Linear(4, 8)
        for name in names:
            layer = nn.Linear(8, 1)
            object.__setattr__(self, name, layer)  # <- cause

    def forward(self, x):
        h = torch.tanh(self.trunk(x))
        return torch.cat([getattr(self, n)(h) for n in self.names], dim=1)


model = MultiHead(["a", "b"])
opt = torch.optim.Adam(OPT_PARAMS, lr=1e-2)
""",
    "vars_in_helper_block": """
class Base(nn.Module):
    def attach(self, name, block):
        vars(self)[name] = block  # <- cause


class Tower(Base):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(4, 6)
        self.attach("neck", nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 2)))

    def forward(self, x):
        return self.neck(self.stem(x))


model = Tower()
opt = torch.optim.SGD(OPT_PARAMS, lr=0.05)
""",
}

BUGGY_OPT = "model.parameters()"
# the same programs with every stored layer's parameters handed to the optimizer
FIXED_OPT = {
    "dict_constant_key": "list(model.body.parameters()) + list(model.head.parameters())",
    "object_setattr_loop": "[p for m in [model, model.a, model.b] for p in m.parameters()]",
    "vars_in_helper_block": "list(model.stem.parameters()) + list(model.neck.parameters())",
}


@pytest.mark.parametrize("name", sorted(STORED))
def test_layer_stored_past_registration_named_at_store(name, run_script):
    src = HEAD + STORED[name].replace("OPT_PARAMS", BUGGY_OPT) + LOOP
    res = run_script(src)
    first = res.findings[0] if res.findings else None
    assert first and (first["code"], first["line"]) == ("GT401", marked_line(src)), res.findings


LOOKALIKES = {
    **{f"{k}_optimized": STORED[k].replace("OPT_PARAMS", v) for k, v in FIXED_OPT.items()},
    "registered_with_setattr": STORED["object_setattr_loop"].replace(
        "object.__setattr__(self, name, layer)", "setattr(self, name, layer)").replace(
        "OPT_PARAMS", BUGGY_OPT),
    "frozen_teacher_hidden": """
class Student(nn.Module):
    def __init__(self, teacher):
        super().__init__()
        self.net = nn.Linear(4, 2)
        teacher.requires_grad_(False)
        object.__setattr__(self, "teacher", teacher)

    def forward(self, x):
        with torch.no_grad():
            target = self.teacher(x)
        return self.net(x) + 0.0 * target


model = Student(nn.Linear(4, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
""",
}


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_layer_stored_past_registration_lookalikes_silent(name, run_script):
    res = run_script(HEAD + LOOKALIKES[name] + LOOP)
    assert res.code == 0, res.err
    assert res.findings == [], res.findings
