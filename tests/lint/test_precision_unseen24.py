"""Shapes that fired wrongly on the projects of docs/triage/unseen24.md (session 24), each in
another spelling than the project's and next to a buggy twin that is still reported. Every
snippet runs on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import copy
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # Pointnet2_PyTorch / pointMLP (pointnet2_ops/pointnet2_utils.py): `ThreeNN.forward` marks
    # both outputs `ctx.mark_non_differentiable(dist, idx)` and `backward` returns `()`: no
    # output requires grad, autograd never calls it. Twin: the same kernel without the mark
    "index-kernel-outputs-marked-non-differentiable": (Shape("""
        class NearestTwo(torch.autograd.Function):
            @staticmethod
            def forward(ctx, query, points):
                gap, which = torch.cdist(query, points).topk(2, largest=False)
                ctx.mark_non_differentiable(gap, which)
                return gap, which
            @staticmethod
            def backward(ctx, g_gap, g_which):
                return ()
        q = torch.randn(5, 3, requires_grad=True)
        p = torch.randn(7, 3)
        feats = torch.randn(7, 4, requires_grad=True)
        gap, which = NearestTwo.apply(q, p)
        (feats[which] / (gap[..., None] + 1e-8)).sum().backward()
        """, "GT701", holds="feats.grad is not None and not gap.requires_grad"), Shape("""
        class NearestTwo(torch.autograd.Function):
            @staticmethod
            def forward(ctx, query, points):
                gap, which = torch.cdist(query, points).topk(2, largest=False)
                return gap, which
            @staticmethod
            def backward(ctx, g_gap, g_which):
                return ()
        q = torch.randn(5, 3, requires_grad=True)
        p = torch.randn(7, 3)
        feats = torch.randn(7, 4, requires_grad=True)
        gap, which = NearestTwo.apply(q, p)
        (feats[which] / (gap[..., None] + 1e-8)).sum().backward()
        """, "GT701", line=8, raises=(RuntimeError, "incorrect number of gradients"))),
    # PC-DARTS (model_search.py): architecture weights made with `requires_grad=True`, listed in
    # `self._arch_parameters = [...]` and handed out by `arch_parameters()` to the architect's
    # own Adam, kept out of `parameters()` (the weights' SGD) on purpose. Twin: no accessor,
    # the optimizer walks `parameters()` and the mixing weights never move
    "parameter-group-handed-out-by-an-accessor": (Shape("""
        class Mixed(nn.Module):
            def __init__(self):
                super().__init__()
                self.ops = nn.ModuleList([nn.Linear(3, 3), nn.Identity()])
                self.mix = torch.full((2,), 1e-3, requires_grad=True)
                self._groups = (self.mix,)
            def structure(self):
                return self._groups
            def forward(self, x):
                w = self.mix.softmax(0)
                return sum(wi * op(x) for wi, op in zip(w, self.ops))
        net = Mixed()
        before = net.mix.detach().clone()
        arch_opt = torch.optim.Adam(net.structure(), lr=0.1)
        net(torch.randn(4, 3)).pow(2).mean().backward()
        arch_opt.step()
        """, "GT402", holds="not torch.equal(before, net.mix)"), Shape("""
        class Mixed(nn.Module):
            def __init__(self):
                super().__init__()
                self.ops = nn.ModuleList([nn.Linear(3, 3), nn.Identity()])
                self.mix = torch.full((2,), 1e-3, requires_grad=True)
            def structure(self):
                return self.mix.softmax(0)
            def forward(self, x):
                w = self.structure()
                return sum(wi * op(x) for wi, op in zip(w, self.ops))
        net = Mixed()
        before = net.mix.detach().clone()
        opt = torch.optim.Adam(net.parameters(), lr=0.1)
        net(torch.randn(4, 3)).pow(2).mean().backward()
        opt.step()
        """, "GT402", line=5, holds="torch.equal(before, net.mix)")),
    # CORL (algorithms/offline/cql.py, finetune/cql.py, cal_ql.py): `alpha, alpha_loss =
    # self._alpha_and_alpha_loss(obs, log_pi)` reads `log_pi` only as `(log_pi + t).detach()`:
    # the temperature loss's backward frees nothing of the policy's graph. Twin: the method
    # reads it undetached: the policy loss's backward then raises
    "helper-method-detaches-the-shared-value": (Shape("""
        class Agent:
            def __init__(self):
                self.pi = nn.Linear(3, 2)
                self.log_t = torch.zeros((), requires_grad=True)
                self.t_opt = torch.optim.SGD([self.log_t], lr=0.1)
                self.pi_opt = torch.optim.SGD(self.pi.parameters(), lr=0.1)
            def _temperature_loss(self, logp):
                return -(self.log_t * (logp + 1.0).detach()).mean()
            def update(self, s):
                logp = self.pi(s).log_softmax(-1).max(-1).values
                t_loss = self._temperature_loss(logp)
                pi_loss = (0.2 * logp - logp.exp()).mean()
                self.t_opt.zero_grad()
                t_loss.backward()
                self.t_opt.step()
                self.pi_opt.zero_grad()
                pi_loss.backward()
                self.pi_opt.step()
                return pi_loss.item()
        last = Agent().update(torch.randn(8, 3))
        """, "GT509", holds="last == last"), Shape("""
        class Agent:
            def __init__(self):
                self.pi = nn.Linear(3, 2)
                self.log_t = torch.zeros((), requires_grad=True)
                self.t_opt = torch.optim.SGD([self.log_t], lr=0.1)
                self.pi_opt = torch.optim.SGD(self.pi.parameters(), lr=0.1)
            def _temperature_loss(self, logp):
                return -(self.log_t * (logp + 1.0)).mean()
            def update(self, s):
                logp = self.pi(s).log_softmax(-1).max(-1).values
                t_loss = self._temperature_loss(logp)
                pi_loss = (0.2 * logp - logp.exp()).mean()
                self.t_opt.zero_grad()
                t_loss.backward()
                self.t_opt.step()
                self.pi_opt.zero_grad()
                pi_loss.backward()
                self.pi_opt.step()
                return pi_loss.item()
        last = Agent().update(torch.randn(8, 3))
        """, "GT509", line=14,
        raises=(RuntimeError, "backward through the graph a second time"))),
    # DARTS-style networks (pdarts/PC-DARTS model.py, nas-without-training pycls/models/nas):
    # `logits_aux = self.auxiliary_head(s1)` under `if i == 2 * layers // 3` in the loop of
    # cells, the head starting with `nn.ReLU(inplace=True)`: the call's own argument is no
    # read again, the value read after the loop is the last cell's, and the next cell starts
    # with a ReLU (same logits as an out-of-place head). Twin: the head runs on every pass,
    # so the output layer reads the activated last value
    "auxiliary-head-on-one-pass-of-the-loop": (Shape("""
        class Side(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.Sequential(nn.ReLU(inplace=True), nn.Linear(4, 2))
            def forward(self, z):
                return self.layers(z)
        class Deep(nn.Module):
            def __init__(self):
                super().__init__()
                self.cells = nn.ModuleList(nn.Sequential(nn.ReLU(), nn.Linear(4, 4))
                                           for _ in range(3))
                self.head = Side()
                self.out = nn.Linear(4, 2)
            def forward(self, h):
                side = None
                for k, cell in enumerate(self.cells):
                    h = cell(h)
                    if k == 1:
                        side = self.head(h)
                return self.out(h), side
        net = Deep()
        ref = copy.deepcopy(net)
        ref.head.layers[0].inplace = False
        x = torch.randn(6, 4)
        same = torch.allclose(net(x)[0], ref(x)[0])
        """, "GT607", holds="same"), Shape("""
        class Side(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.Sequential(nn.ReLU(inplace=True), nn.Linear(4, 2))
            def forward(self, z):
                return self.layers(z)
        class Deep(nn.Module):
            def __init__(self):
                super().__init__()
                self.cells = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))
                self.head = Side()
                self.out = nn.Linear(4, 2)
            def forward(self, h):
                side = None
                for k, cell in enumerate(self.cells):
                    h = cell(h)
                    side = self.head(h)
                return self.out(h), side
        net = Deep()
        ref = copy.deepcopy(net)
        ref.head.layers[0].inplace = False
        x = torch.randn(6, 4)
        same = torch.allclose(net(x)[0], ref(x)[0])
        """, "GT607", line=4, holds="not same")),
    # P-DARTS (train_search.py): a `CosineAnnealingLR(optimizer, float(args.epochs))` stepped in
    # `for epoch in range(epochs)` (`epochs = args.epochs`) inside the loop of search stages:
    # the stepping loop is the epoch loop, its bound the period. Twin: stepped in the batch loop
    "epoch-loop-inside-a-stage-loop": (Shape("""
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        def run_epoch(batches):
            for x in batches:
                opt.zero_grad()
                net(x).pow(2).mean().backward()
                opt.step()
        n_epochs = 4
        firsts = []
        for stage in range(2):
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, float(n_epochs))
            epochs = n_epochs
            for epoch in range(epochs):
                run_epoch([torch.randn(2, 3) for _ in range(3)])
                sched.step()
                if epoch == 0:
                    firsts.append(opt.param_groups[0]["lr"])
        """, "GT526", holds="firsts[0] > 0.05"), Shape("""
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        n_epochs = 4
        firsts = []
        for stage in range(2):
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, float(n_epochs))
            for epoch in range(n_epochs):
                for x in [torch.randn(2, 3) for _ in range(3)]:
                    opt.zero_grad()
                    net(x).pow(2).mean().backward()
                    opt.step()
                    sched.step()
                if epoch == 0:
                    firsts.append(opt.param_groups[0]["lr"])
        """, "GT526", line=12, holds="firsts[0] < 0.05")),
    # DUN (src/baselines/img_utils.py): `log_probs = img_resnet_predict(model, images).data`
    # appended in a loop over the loader: `.data` on the helper's result keeps no graph.
    # Twin: the result appended as it is, with its graph
    "helper-result-taken-by-data": (Shape("""
        def predict(net, x):
            return F.log_softmax(net(x), 1)
        def collect(net, batches):
            outs = []
            for x in batches:
                lp = predict(net, x).data
                outs.append(lp)
            return torch.cat(outs)
        got = collect(nn.Linear(3, 2), [torch.randn(2, 3) for _ in range(3)])
        """, "GT505", holds="got.grad_fn is None"), Shape("""
        def predict(net, x):
            return F.log_softmax(net(x), 1)
        def collect(net, batches):
            outs = []
            for x in batches:
                lp = predict(net, x)
                outs.append(lp)
            return torch.cat(outs)
        got = collect(nn.Linear(3, 2), [torch.randn(2, 3) for _ in range(3)])
        """, "GT505", line=7, holds="got.grad_fn is not None")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
