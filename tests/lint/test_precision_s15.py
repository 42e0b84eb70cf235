"""Shapes that fired wrongly on the projects of docs/triage/unseen15.md (session 15:
MCD_DA, GraphCL), each in another spelling than the project's and next to a buggy twin
that is still reported. Every snippet runs on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # MCD_DA (visda_classification/res_train_main.py): `optimizer_g = SGD(G.features
    # .parameters())`; step A steps both optimizers, step C backwards the discrepancy and
    # steps `optimizer_g` alone: the discrepancy trains the generator, whose call `G(data)`
    # runs its submodule `G.features`; the classifiers' share is meant to be dropped. Here
    # the submodule is `gen.body` and the discrepancy is weighted. Twin: the last step is of
    # an optimizer over a module the discrepancy never reaches: it trains nothing
    "discrepancy-stepped-by-an-optimizer-over-a-submodule": (Shape("""
        class Gen(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 6)
            def forward(self, x):
                return torch.relu(self.body(x))
        def run(weight):
            torch.manual_seed(0)
            gen, c1, c2 = Gen(), nn.Linear(6, 3), nn.Linear(6, 3)
            opt_body = torch.optim.SGD(gen.body.parameters(), lr=0.1)
            opt_cls = torch.optim.SGD(list(c1.parameters()) + list(c2.parameters()), lr=0.1)
            for _ in range(3):
                x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
                opt_body.zero_grad()
                opt_cls.zero_grad()
                h = gen(x)
                sup = F.cross_entropy(c1(h), y) + F.cross_entropy(c2(h), y)
                sup.backward()
                opt_cls.step()
                opt_body.step()
                opt_body.zero_grad()
                h = gen(x)
                gap = weight * (c1(h).softmax(1) - c2(h).softmax(1)).abs().mean()
                gap.backward()
                opt_body.step()
            return gen.body.weight.detach().clone()
        trains = not torch.equal(run(1.0), run(0.0))
        """, "GT522", holds="trains"), Shape("""
        class Gen(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 6)
            def forward(self, x):
                return torch.relu(self.body(x))
        def run(weight):
            torch.manual_seed(0)
            gen, c1, c2 = Gen(), nn.Linear(6, 3), nn.Linear(6, 3)
            aux = nn.Linear(2, 2)
            opt_aux = torch.optim.SGD(aux.parameters(), lr=0.1)
            opt_cls = torch.optim.SGD(list(c1.parameters()) + list(c2.parameters()), lr=0.1)
            for _ in range(3):
                x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
                opt_aux.zero_grad()
                opt_cls.zero_grad()
                h = gen(x)
                sup = F.cross_entropy(c1(h), y) + F.cross_entropy(c2(h), y)
                sup.backward()
                opt_cls.step()
                h = gen(x)
                gap = weight * (c1(h).softmax(1) - c2(h).softmax(1)).abs().mean()
                gap.backward()
                opt_aux.step()
            return c1.weight.detach().clone()
        trains = not torch.equal(run(1.0), run(0.0))
        """, "GT522", 20, holds="not trains")),
    # GraphCL (unsupervised_Cora_Citeseer/execute.py): `embeds, _ = model.embed(features,
    # adj, ...)` with `model = DGI(...)` of another file, whose `embed` returns `h.detach()`;
    # then 50 fresh `LogReg` probes trained on the embeddings. Here the encoder's `embed` of
    # tests/lint/probe_encoders.py and a linear probe. Twin: its `encode`, which keeps the
    # graph, with the loop training the encoder too: the second backward raises
    "probe-on-an-imported-model-method-the-loop-does-not-train": (Shape("""
        from tests.lint.probe_encoders import GraphEncoder
        encoder = GraphEncoder(6, 4)
        nodes, labels = torch.randn(10, 6), torch.randint(0, 2, (10,))
        reps = encoder.embed(nodes)
        accs = []
        for trial in range(2):
            probe = nn.Linear(4, 2)
            opt = torch.optim.Adam(probe.parameters(), lr=0.01)
            for _ in range(3):
                opt.zero_grad()
                loss = F.cross_entropy(probe(reps), labels)
                loss.backward()
                opt.step()
            accs.append((probe(reps).argmax(1) == labels).float().mean())
        """, "GT507", holds="len(accs) == 2"), Shape("""
        from tests.lint.probe_encoders import GraphEncoder
        encoder = GraphEncoder(6, 4)
        nodes, labels = torch.randn(10, 6), torch.randint(0, 2, (10,))
        reps = encoder.encode(nodes)
        probe = nn.Linear(4, 2)
        opt = torch.optim.Adam(list(probe.parameters()) + list(encoder.parameters()), lr=0.01)
        for _ in range(3):
            opt.zero_grad()
            loss = F.cross_entropy(probe(reps), labels)
            loss.backward()
            opt.step()
        """, "GT507", 4, raises=(RuntimeError, "backward through the graph a second time"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
