"""Shapes from the projects of docs/triage/unseen54a.md (session 54), each in another
spelling than the project's and next to a buggy twin that is still reported; all run on real
torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
'''

# an iterative attack that re-wraps its input as a new leaf on every pass (an aliased import)
ATTACK = '''
{v}
model = nn.Linear(4, 4)
x = torch.rand(2, 4)
for i in range(3):
    x = {wrap}
    loss = model(x).pow(2).mean()
    loss.backward()
    x = (x - 0.01 * torch.ones_like(x)).clamp(0, 1)
'''

# importance weights from posterior draws scored by a generator (an entropy estimator)
IMPORTANCE = '''
enc, gen = nn.Linear(4, 2), nn.Linear(2, 3)
x = torch.randn(6, 4)
h = enc(x)
d = torch.distributions.Normal(h, 0.5)
hs = d.sample((5,))
logq, logits = gen(hs).log_softmax(-1).sum(-1), gen(hs)
w = (logq - d.log_prob(hs).sum(-1)).softmax(0)
c = (logits.softmax(-1) * w[..., None]).sum(0){detach}
loss = (c * gen(h)).sum()
loss.backward()
'''

# the same attack loop updating by rebinding, its input made a leaf again on the next pass
REWRAP = '''
from torch.autograd import Variable as V
model = nn.Linear(4, 1)
x = torch.rand(2, 4)
for i in range(3):
    x = V(x{flag})
    loss = model(x).sum()
    loss.backward()
    x = x - 0.01 * x.grad.sign()
    x = x.clamp(0, 1)
'''

SHAPES = {
    "leaf-rewrapped-by-an-aliased-variable": (
        Shape(ATTACK.format(v="from torch.autograd import Variable as V",
                            wrap="V(x, requires_grad=True)"), "GT506",
              holds="x.grad_fn is not None and model.weight.grad is not None"),
        Shape(ATTACK.format(v="V = nn.Linear(4, 4)", wrap="V(x)"), "GT506", line=5,
              raises=(RuntimeError, "second time"))),
    "update-rebound-then-rewrapped-as-a-leaf": (
        Shape(REWRAP.format(flag=", requires_grad=True"), "GT301",
              holds="model.weight.grad is not None"),
        Shape(REWRAP.format(flag=""), "GT301", line=8, raises=(AttributeError, "NoneType"))),
    "sample-scored-only-for-detached-weights": (
        Shape(IMPORTANCE.format(detach=".detach()"), "GT720",
              holds="not hs.requires_grad and enc.weight.grad is not None"),
        Shape(IMPORTANCE.format(detach=""), "GT720", line=5, holds="not hs.requires_grad")),
}


@pytest.mark.parametrize("name,which", [(n, i) for n in SHAPES for i in (0, 1)])
def test_shape(name: str, which: int) -> None:
    judge(PRELUDE, SHAPES[name][which])


# a model built by a factory of another file; the script freezes one of its attributes
FACTORY = '''
import torch
import torch.nn as nn


def build_model():
    return Scaled()


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.scale = nn.Parameter(torch.ones(4))

    def forward(self, x):
        return self.body(x) * self.scale
'''
SCRIPT = '''
import torch
from nets import build_model

model = build_model()
model.{attr}.requires_grad = False
frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
'''


@pytest.mark.parametrize("attr,line,frozen", [
    ("scale", None, ["scale"]),  # a Parameter of the built class: the flag freezes it
    ("body", 6, []),             # a submodule: a plain attribute, nothing frozen (recall 54a #6)
])
def test_attribute_of_a_foreign_factory_model(tmp_path, monkeypatch, attr: str,
                                              line: int | None, frozen: list) -> None:
    """GT407 through ``build_model()`` of another file whose ``return`` builds a module class
    of that file: the class's ``__init__`` says what ``model.<attr>`` is."""
    import sys
    from gradtrace.lint.config import Settings
    from gradtrace.lint import check_paths
    (tmp_path / "nets.py").write_text(FACTORY)
    (tmp_path / "train.py").write_text(SCRIPT.format(attr=attr))
    found = [f for f in check_paths([str(tmp_path)], Settings()).findings if f.code == "GT407"]
    assert [(f.line, f.code) for f in found] == ([] if line is None else [(line, "GT407")])
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("nets", None)
    env: dict = {}
    exec(compile(SCRIPT.format(attr=attr), str(tmp_path / "train.py"), "exec"), env)
    sys.modules.pop("nets", None)
    assert env["frozen"] == frozen
