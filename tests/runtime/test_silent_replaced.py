"""Where a layer or parameter was replaced (NOTE [replaced after the optimizer]) and where a
leaf was converted into a non-leaf copy: the line named first, and look-alikes that stay
silent. Real torch, tiny models, in-process runs."""
from __future__ import annotations

import pytest

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.head = nn.Linear(6, 8), nn.Linear(8, 3)

    def forward(self, x):
        return self.head(torch.relu(self.body(x)))

def fit(model, opt, steps=3):
    g = torch.Generator().manual_seed(0)
    for _ in range(steps):
        x, y = torch.randn(4, 6, generator=g), torch.randint(0, 3, (4,), generator=g)
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
"""

BUGS = {
    # a helper object swaps the layers in: the call made after the optimizer is the cause
    "layers_swapped_by_helper_after_optimizer": ("GT404", """
class Shrinker:
    def __init__(self, net):
        self.net = net

    def apply(self):
        setattr(self.net, "head", nn.Linear(8, 3))
        return self.net

model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
Shrinker(model).apply()  # C
fit(model, opt)
"""),
    # a module's own method re-creates its parameter: that assignment is the cause
    "parameter_recreated_by_its_module": ("GT404", """
class Scaled(Net):
    def __init__(self):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(1))

    def calibrate(self, value):
        self.gain = nn.Parameter(torch.full((1,), value))  # C

    def forward(self, x):
        return super().forward(x) * self.gain

model = Scaled()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
model.calibrate(0.5)
fit(model, opt)
"""),
    # .to() of a leaf that requires grad: the copy is used, its .grad stays None
    "leaf_converted_to_a_copy": ("GT305", """
w = torch.randn(3, dtype=torch.float64, requires_grad=True)
w32 = w.to(torch.float32)  # C
for _ in range(2):
    (w32 * w32).mean().backward(retain_graph=True)
    print(w32.grad)
"""),
    # a plain tensor attribute made in a helper method (None in __init__): that line
    "plain_tensor_made_in_a_helper_method": ("GT402", """
class Cell(Net):
    def __init__(self):
        super().__init__()
        self.peep = None

    def init_state(self):
        if self.peep is None:
            self.peep = torch.zeros(1, 3, requires_grad=True)  # C

    def forward(self, x):
        return super().forward(x) * self.peep

model = Cell()
model.init_state()
fit(model, torch.optim.SGD(model.parameters(), lr=0.1))
"""),
}

LOOKALIKES = {
    "layers_swapped_before_optimizer": """
model = Net()
setattr(model, "head", nn.Linear(8, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
fit(model, opt)
""",
    "parameter_written_in_place": """
class Scaled(Net):
    def __init__(self):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(1))

    def calibrate(self, value):
        with torch.no_grad():
            self.gain.fill_(value)

    def forward(self, x):
        return super().forward(x) * self.gain

model = Scaled()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
model.calibrate(0.5)
fit(model, opt)
""",
    "converted_before_requires_grad": """
w = torch.randn(3, dtype=torch.float64).to(torch.float32).requires_grad_()
for _ in range(2):
    (w * w).mean().backward()
    print(w.grad)
""",
}


BUGS_3 = {
    # plain tensors trained by the optimizer, rebuilt into a new tensor by a helper: the run
    # names the caller that hands the helper its tensors (runtime45b's conversion helper), and
    # the static GT111 at the helper's as_tensor accounts for it and leads
    "trained_scalars_rebuilt_by_as_tensor": ("GT111", """
def to_tensor(data):
    if isinstance(data, torch.Tensor):
        return data
    return torch.as_tensor(data)  # C

net = nn.Linear(1, 1)
c1, c2 = torch.tensor(1.0, requires_grad=True), torch.tensor(0.5, requires_grad=True)
opt = torch.optim.Adam(list(net.parameters()) + [c1, c2], lr=1e-2)
x = torch.linspace(0, 1, 8).unsqueeze(1)
for _ in range(3):
    opt.zero_grad()
    k = to_tensor((c1, c2))
    ((net(x) - k[0] * x - k[1]) ** 2).mean().backward()
    opt.step()
"""),
    # a layer written as a plain class: its Parameter is not registered
    "layer_class_not_a_module": ("GT401", """
class Projection:  # C
    def __init__(self):
        self.weight = nn.Parameter(torch.randn(3, 8) * 0.1)

    def __call__(self, h):
        return F.linear(h, self.weight)

class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.out = nn.Linear(6, 8), Projection()

    def forward(self, x):
        return self.out(torch.relu(self.body(x)))

model = Tiny()
fit(model, torch.optim.SGD(model.parameters(), lr=0.1))
"""),
}

LOOKALIKES_3 = {
    "trained_scalars_stacked": """
net = nn.Linear(1, 1)
c1, c2 = torch.tensor(1.0, requires_grad=True), torch.tensor(0.5, requires_grad=True)
opt = torch.optim.Adam(list(net.parameters()) + [c1, c2], lr=1e-2)
x = torch.linspace(0, 1, 8).unsqueeze(1)
for _ in range(3):
    opt.zero_grad()
    k = torch.stack((c1, c2))
    ((net(x) - k[0] * x - k[1]) ** 2).mean().backward()
    opt.step()
""",
    "layer_class_is_a_module": """
class Projection(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(3, 8) * 0.1)

    def forward(self, h):
        return F.linear(h, self.weight)

class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.out = nn.Linear(6, 8), Projection()

    def forward(self, x):
        return self.out(torch.relu(self.body(x)))

model = Tiny()
fit(model, torch.optim.SGD(model.parameters(), lr=0.1))
""",
}
BUGS.update(BUGS_3)
LOOKALIKES.update(LOOKALIKES_3)


@pytest.mark.parametrize("name", sorted(BUGS))
def test_cause_line_named_first(run_script, name):
    code, body = BUGS[name]
    src = (HEAD + body).lstrip("\n")
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))
    res = run_script(src)
    assert res.findings, res.err
    assert (res.findings[0]["code"], res.findings[0]["line"]) == (code, line), res.findings


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalike_silent(run_script, name):
    res = run_script((HEAD + LOOKALIKES[name]).lstrip("\n"))
    assert res.code == 0 and res.findings == [], res.findings
