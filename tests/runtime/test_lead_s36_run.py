"""Session 36, the lead: a layer kept in a plain list whose negated output is one side of an
elementwise max (a constructive-geometry difference, a hinge) is not a critic the loss climbs
(NOTE [maximized module output]): the run still names the list that hides it from the
optimizer. Registered with ``nn.ModuleList`` it trains and the run is silent."""
from __future__ import annotations

from rt_helpers import marked_line

SRC = """
import torch
import torch.nn as nn

torch.manual_seed(0)


class Blob(nn.Module):
    def __init__(self, r):
        super().__init__()
        self.r = nn.Parameter(torch.tensor(r))

    def forward(self, q):
        return q.norm(dim=-1) - self.r


class Carved(nn.Module):
    def __init__(self, outer, *holes):
        super().__init__()
        self.outer = outer
        self.holes = list(holes)  # <- cause

    def forward(self, q):
        d = self.outer(q)
        for h in self.holes:
            d = torch.maximum(d, -h(q))
        return d


shape = Carved(Blob(1.0), Blob(0.4))
q = torch.rand(64, 2) * 2 - 1
target = torch.rand(64)
opt = torch.optim.Adam(shape.parameters(), lr=1e-2)
for _ in range(3):
    loss = (shape(q) - target).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_hidden_layer_negated_inside_a_max_names_the_list(run_script):
    res = run_script(SRC)
    first = res.findings[0]
    assert (first["code"], first["line"]) == ("GT401", marked_line(SRC)), res.findings


def test_registered_layers_are_silent(run_script):
    res = run_script(SRC.replace("list(holes)", "nn.ModuleList(holes)"))
    assert res.code == 0, res.err
    assert [f for f in res.findings if f["code"] in ("GT401", "GT821")] == [], res.findings
