"""Shapes that fired wrongly on the projects of docs/triage/unseen31b.md (session 31), each in
another spelling than the project's and next to a buggy twin that is still reported. Every
snippet runs on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import numpy as np
import torch
import torch.nn as nn
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

# an optimizer that scales the loss and runs its backward itself (apex's `FP16_Optimizer`,
# fairseq's and Megatron's optimizers): `optimizer.backward(loss)` differentiates `loss`
SCALING_OPTIMIZER = '''
class LossScalingOptimizer:
    def __init__(self, inner, scale=128.0):
        self.inner, self.scale = inner, scale
    def backward(self, loss):
        (loss * self.scale).backward()
    def step(self):
        for group in self.inner.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.grad.div_(self.scale)
        self.inner.step()
    def zero_grad(self):
        self.inner.zero_grad()
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # SpanBERT (code/run_glue.py, run_squad.py, run_mrqa.py, run_tacred.py): `optimizer =
    # FP16_Optimizer(FusedAdam(grouped params of model))`, then `optimizer.backward(loss)` each
    # pass on a loss computed in the loop: the optimizer is not the value differentiated.
    # Twin: the features are computed once before the loop, the loss is backwarded through
    # them on every pass: 'Trying to backward through the graph a second time'
    "optimizer-that-runs-the-backward-of-its-argument": (Shape("""
        def fine_tune(batches, lr):
            model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
            params = list(model.parameters())
            start = model[0].weight.detach().clone()
            optimizer = LossScalingOptimizer(torch.optim.SGD(params, lr=lr))
            for x in batches:
                loss = model(x).pow(2).mean()
                optimizer.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
            return model, start
        m, w0 = fine_tune([torch.randn(2, 3) for _ in range(3)], 0.1)
        """, "GT507", holds="not torch.equal(m[0].weight, w0)"), Shape("""
        def fine_tune(batches, lr, encoder):
            model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
            params = list(model.parameters())
            optimizer = LossScalingOptimizer(torch.optim.SGD(params, lr=lr))
            feats = encoder(batches[0])
            for step in range(3):
                loss = model(feats).pow(2).mean()
                optimizer.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
            return model
        fine_tune([torch.randn(2, 3)], 0.1, nn.Sequential(nn.Linear(3, 3), nn.Tanh()))
        """, "GT507", line=5, raises=(RuntimeError, "backward through the graph a second time"))),
    # DGN (realworld_benchmark/data/SBMs.py): `SBMsDataset(torch.utils.data.Dataset)`, its
    # `collate_dense_gnn` normalises each graph's adjacency with `_sym_normalize_adj(adj)`:
    # `torch.where(deg > 0, 1. / torch.sqrt(deg), zeros)`; a Dataset prepares samples, no
    # backward reaches them. Twin: the same normalisation of a learned adjacency in a
    # module's forward: the isolated node's gradient is NaN
    "degree-normalisation-in-a-dataset": (Shape("""
        class Graphs(torch.utils.data.Dataset):
            def __init__(self, adjs):
                self.adjs = adjs
            def __len__(self):
                return len(self.adjs)
            def __getitem__(self, i):
                return self.normalized(self.adjs[i])
            def normalized(self, adj):
                deg = adj.sum(dim=0)
                d = torch.where(deg > 0, 1.0 / torch.sqrt(deg), torch.zeros_like(deg))
                return torch.diag(d) @ adj @ torch.diag(d)
        adj = torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
        out = Graphs([adj])[0]
        """, "GT751", holds="not torch.isnan(out).any()"), Shape("""
        class LearnedGraph(nn.Module):
            def __init__(self):
                super().__init__()
                self.adj = nn.Parameter(torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0],
                                                      [0.0, 0.0, 0.0]]))
            def forward(self, x):
                deg = self.adj.sum(dim=0)
                d = torch.where(deg > 0, 1.0 / torch.sqrt(deg), torch.zeros_like(deg))
                return torch.diag(d) @ self.adj @ torch.diag(d) @ x
        g = LearnedGraph()
        g(torch.ones(3, 2)).sum().backward()
        """, "GT751", line=8, holds="torch.isnan(g.adj.grad).any()")),
    # KGAT-pytorch (main_kgat.py): `cf_optimizer` and `kg_optimizer`, both Adam over
    # `model.parameters()`, each epoch runs a CF loop (its backward, `cf_optimizer.step()`,
    # `zero_grad()`) and then a KG loop (the same with `kg_optimizer`): alternating phases,
    # each step on its own loss. Twin (DiffRec's L-DiffRec/main.py with `--optimizer1
    # Adagrad`): both stepped after one backward: the weights move twice per batch
    "optimizers-over-one-model-stepped-in-alternating-inner-loops": (Shape("""
        model = nn.Linear(2, 1)
        cf_opt = torch.optim.SGD(model.parameters(), lr=0.1)
        kg_opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(2):
            for x in [torch.ones(1, 2)]:
                model(x).sum().backward()
                cf_opt.step()
                cf_opt.zero_grad()
            for x in [torch.ones(1, 2)]:
                model(x).pow(2).sum().backward()
                kg_opt.step()
                kg_opt.zero_grad()
        """, "GT406"), Shape("""
        model = nn.Linear(2, 1)
        w0 = model.weight.detach().clone()
        opt1 = torch.optim.SGD(model.parameters(), lr=0.1)
        opt2 = torch.optim.SGD(model.parameters(), lr=0.1)
        for x in [torch.ones(1, 2)]:
            opt1.zero_grad()
            opt2.zero_grad()
            model(x).sum().backward()
            opt1.step()
            opt2.step()
        """, "GT406", line=4,
            holds="torch.allclose(model.weight, w0 - 2 * 0.1 * model.weight.grad)")),
    # KGAT-pytorch (utils/metrics.py): `def logloss(ground_truth, prediction)` returning
    # scikit-learn's `log_loss(np.asarray(ground_truth), np.asarray(prediction))`: a metric by
    # design (here SciPy's `entropy` under that name: scikit-learn is not installed). Twin: a
    # loss of the file's own rebuilt from NumPy, backpropagated: 'does not require grad'
    "loss-named-wrapper-of-a-library-metric": (Shape("""
        from scipy.stats import entropy as log_loss
        def logloss(truth, prediction):
            value = log_loss(np.asarray(truth), np.asarray(prediction))
            return value
        def evaluate(pairs):
            return [logloss(t, p) for t, p in pairs]
        score = evaluate([([0.5, 0.5], [0.9, 0.1])])[0]
        """, "GT103", holds="score > 0"), Shape("""
        def l2_loss(truth, prediction):
            return torch.tensor(np.mean((np.asarray(truth) - np.asarray(prediction)) ** 2))
        model = nn.Linear(2, 1)
        pred = model(torch.ones(3, 2)).detach().numpy()
        l2_loss(np.zeros((3, 1)), pred).backward()
        """, "GT103", line=2, raises=(RuntimeError, "does not require grad"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE + SCALING_OPTIMIZER, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE + SCALING_OPTIMIZER, SHAPES[name][1])
