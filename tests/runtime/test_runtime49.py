"""runtime49 on real torch, one process, a few steps, tiny models.

- NOTE [frozen by a library call's default] (GT867): ``nn.Embedding.from_pretrained(w)``
  (``freeze`` left at its default True) makes a frozen weight; the optimizer gets
  ``model.parameters()`` and trains the rest: named at the ``from_pretrained`` line.
  Look-alikes: ``freeze=True`` passed (the caller's own choice), the optimizer built from the
  trainable parameters only, the embedding thawed later by the user, a Parameter the user's
  own code makes frozen (``nn.Parameter(t, requires_grad=False)``), a weight the user froze
  and then moved under a parametrization (registered frozen again by library code whose flags
  are at their defaults). Silent: ``freeze=False``.
"""
from __future__ import annotations

import pytest

from tests.runtime.rt_helpers import marked_line

torch = pytest.importorskip("torch")

EMB = """
import torch
import torch.nn as nn
torch.manual_seed(0)


class Rec(nn.Module):
    def __init__(self, pretrained):
        super().__init__()
        self.users = nn.Embedding(5, 4)
        MAKE
        self.head = nn.Linear(4, 1)

    def forward(self, u, i):
        return self.head(self.users(u) * self.items(i)).squeeze(-1)


model = Rec(torch.randn(6, 4))
THAW
opt = torch.optim.SGD(PARAMS, lr=0.1)
for step in range(2):
    u, i = torch.randint(0, 5, (8,)), torch.randint(0, 6, (8,))
    loss = (model(u, i) - 1).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _prog(make: str, params: str = "model.parameters()", thaw: str = "") -> str:
    return EMB.replace("MAKE", make).replace("PARAMS", params).replace("THAW", thaw)


def _gt867(res: object) -> list[int]:
    return [f["line"] for f in res.findings if f["code"] == "GT867"]  # type: ignore[attr-defined]


def test_embedding_frozen_by_from_pretrained_default_is_named(run_script):
    src = _prog("self.items = nn.Embedding.from_pretrained(pretrained)  # <- cause")
    res = run_script(src)
    assert res.code == 0, res.err
    assert _gt867(res) == [marked_line(src)], res.findings
    assert res.findings[0]["code"] == "GT867", res.findings


@pytest.mark.parametrize("make, params, thaw", [
    ("self.items = nn.Embedding.from_pretrained(pretrained, freeze=True)",  # said so
     "model.parameters()", ""),
    ("self.items = nn.Embedding.from_pretrained(pretrained)",  # the freeze is known
     "[p for p in model.parameters() if p.requires_grad]", ""),
    ("self.items = nn.Embedding.from_pretrained(pretrained)",  # thawed by the user
     "model.parameters()", "model.items.weight.requires_grad_(True)"),
    ("self.items = nn.Embedding(6, 4)\n        self.items.weight = nn.Parameter(pretrained, "
     "requires_grad=False)", "model.parameters()", ""),  # frozen by the user's own line
    ("self.items = nn.Embedding.from_pretrained(pretrained, freeze=False)",  # silent
     "model.parameters()", ""),
])
def test_freeze_the_caller_chose_or_undid_is_not_reported(run_script, make, params, thaw):
    res = run_script(_prog(make, params, thaw))
    assert res.code == 0, res.err
    assert _gt867(res) == [], res.findings


PARAMETRIZED = """
import torch
import torch.nn as nn
from torch.nn.utils import parametrize
torch.manual_seed(0)


class Scale(nn.Module):
    def forward(self, w):
        return 2 * w


body, head = nn.Linear(4, 4), nn.Linear(4, 1)
body.weight.requires_grad_(False)
parametrize.register_parametrization(body, "weight", Scale())
model = nn.Sequential(body, nn.ReLU(), head)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_weight_the_user_froze_moved_under_a_parametrization_is_not_reported(run_script):
    # register_parametrization (flags at their defaults) registers the frozen weight again
    res = run_script(PARAMETRIZED)
    assert res.code == 0, res.err
    assert _gt867(res) == [], res.findings
