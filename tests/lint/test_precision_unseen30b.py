"""Shapes that fired wrongly on the projects of docs/triage/unseen30b.md (session 30), each in
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
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
warnings.simplefilter("ignore", DeprecationWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GNOT (utils.py): `class Interp1d(torch.autograd.Function)` with a non-static `forward`
    # and its own `__call__` that calls `self.forward(...)`; `Interp1d()(x, y, xnew)` runs that
    # method, a plain call. Twin: no `__call__` of its own: 'Legacy autograd function'
    "function-subclass-with-its-own-call": (Shape("""
        class Scale(torch.autograd.Function):
            def __call__(self, x, k):
                return self.forward(x, k)
            def forward(self, x, k):
                return x * k
        w = torch.ones(3, requires_grad=True)
        Scale()(w, 2.0).sum().backward()
        assert w.grad is not None
        """, "GT705"), Shape("""
        class Scale(torch.autograd.Function):
            def forward(self, x, k):
                return x * k
        w = torch.ones(3, requires_grad=True)
        Scale()(w, 2.0).sum().backward()
        """, "GT705", line=2, raises=(RuntimeError, "Legacy autograd function"))),
    # PINNacle (fbpinns/pdes/inverse.py, ns.py, poisson.py): `bd_loss(self, x, y, ...)` with
    # `y` the network's output at the points `x`, `u, a = y[:, 0:1], y[:, 1:2]` and
    # `losses.l2_loss(a, self.a_ref(x))`, the reference built from `x.detach()`: `y` is the
    # prediction (the loss's first argument), not a target. Twin: the prediction detached
    "network-output-named-y-sliced-into-a-loss": (Shape("""
        def l2_loss(a, b):
            return torch.mean((a - b) ** 2)
        def a_ref(xy):
            xy = xy.detach()
            return 1 / (1 + xy[:, 0:1] ** 2)
        def bd_loss(x, y):
            u, a = y[:, 0:1], y[:, 1:2]
            return l2_loss(a, a_ref(x))
        net = nn.Linear(2, 2)
        x = torch.rand(5, 2, requires_grad=True)
        bd_loss(x, net(x)).backward()
        assert net.weight.grad is not None
        """, "GT107"), Shape("""
        def l2_loss(a, b):
            return torch.mean((a - b) ** 2)
        def bd_loss(x, y):
            u, a = y[:, 0:1], y[:, 1:2]
            return l2_loss(a.detach(), torch.ones_like(a))
        net = nn.Linear(2, 2)
        x = torch.rand(5, 2)
        bd_loss(x, net(x)).backward()
        """, "GT107", line=5, raises=(RuntimeError, "does not require grad"))),
    # FuxiCTR (model_zoo/APG/src/APG.py): `__init__` registers `self.U = nn.Parameter(...)` only
    # in the `else` arm of `if self.use_over_param:`, and `forward` assigns `self.U =
    # torch.matmul(self.U_l, self.U_r)` only under `if self.use_over_param:`: a flag fixed when
    # the module is built, so no instance does both. Twin: the assignment under the same arm
    "parameter-and-plain-value-under-opposite-arms-of-a-flag": (Shape("""
        class LowRank(nn.Module):
            def __init__(self, d, factored):
                super().__init__()
                self.factored = factored
                if self.factored:
                    self.A = nn.Parameter(torch.randn(d, 2))
                    self.B = nn.Parameter(torch.randn(2, d))
                else:
                    self.W = nn.Parameter(torch.randn(d, d))
            def forward(self, x):
                if self.factored:
                    self.W = self.A @ self.B
                return x @ self.W
        for flag in (True, False):
            m = LowRank(3, flag)
            m(torch.randn(2, 3)).sum().backward()
        """, "GT415"), Shape("""
        class LowRank(nn.Module):
            def __init__(self, d, factored):
                super().__init__()
                self.factored = factored
                self.A = nn.Parameter(torch.randn(d, 2))
                self.B = nn.Parameter(torch.randn(2, d))
                if not self.factored:
                    self.W = nn.Parameter(torch.randn(d, d))
            def forward(self, x):
                if not self.factored:
                    self.W = self.A @ self.B
                return x @ self.W
        LowRank(3, False)(torch.randn(2, 3)).sum().backward()
        """, "GT415", line=11, raises=(TypeError, "cannot assign"))),
    # BY571/Implicit-Q-Learning (agent.py): `critic1_loss, critic2_loss = self.calc_q_loss(...)`,
    # the method returning `(((q1 - t)**2).mean(), ((q2 - t)**2).mean())` with `q1` of
    # `self.critic1` and `q2` of `self.critic2`; `critic1_optimizer.step()` before
    # `critic2_loss.backward()` touches nothing that loss saved. Twin: the second element also
    # reads the first critic: 'modified by an inplace operation'
    "second-element-of-a-method-tuple-reads-another-critic": (Shape("""
        class Agent(nn.Module):
            def __init__(self):
                super().__init__()
                self.critic1 = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))
                self.critic2 = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))
                self.opt1 = torch.optim.Adam(self.critic1.parameters())
                self.opt2 = torch.optim.Adam(self.critic2.parameters())
            def q_losses(self, s, target):
                q1 = self.critic1(s)
                q2 = self.critic2(s)
                return (q1 - target).pow(2).mean(), (q2 - target).pow(2).mean()
            def learn(self, s, target):
                loss1, loss2 = self.q_losses(s, target)
                self.opt1.zero_grad()
                loss1.backward()
                self.opt1.step()
                self.opt2.zero_grad()
                loss2.backward()
                self.opt2.step()
        Agent().learn(torch.randn(4, 3), torch.randn(4, 1))
        """, "GT609"), Shape("""
        class Agent(nn.Module):
            def __init__(self):
                super().__init__()
                self.critic1 = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))
                self.critic2 = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))
                self.opt1 = torch.optim.Adam(self.critic1.parameters())
                self.opt2 = torch.optim.Adam(self.critic2.parameters())
            def q_losses(self, s, target):
                q1 = self.critic1(s)
                q2 = self.critic2(s)
                return (q1 - target).pow(2).mean(), (q2 + self.critic1(s) - target).pow(2).mean()
            def learn(self, s, target):
                loss1, loss2 = self.q_losses(s, target)
                self.opt1.zero_grad()
                loss1.backward()
                self.opt1.step()
                self.opt2.zero_grad()
                loss2.backward()
                self.opt2.step()
        Agent().learn(torch.randn(4, 3), torch.randn(4, 1))
        """, "GT609", line=16, raises=(RuntimeError, "modified by an inplace operation"))),
    # XQL (Gumbel_Regression.py, online/research/algs/gumbel_sac.py): `max_z = torch.max(z)`,
    # `max_z = max_z.detach()`, `loss = torch.exp(z - max_z) - z*torch.exp(-max_z) -
    # torch.exp(-max_z)`: the detached maximum scales the live terms too, a stabilising shift;
    # the last term is a constant on purpose. Twin: only the detached value reaches the loss
    "detached-shift-read-by-the-live-terms-too": (Shape("""
        net = nn.Linear(3, 1)
        def gumbel_loss(pred, label, beta=1.0):
            z = (label - pred) / beta
            max_z = torch.max(z)
            max_z = max_z.detach()
            loss = torch.exp(z - max_z) - z * torch.exp(-max_z) - torch.exp(-max_z)
            return loss
        gumbel_loss(net(torch.randn(4, 3)), torch.randn(4, 1)).mean().backward()
        assert net.weight.grad is not None
        """, "GT107"), Shape("""
        net = nn.Linear(3, 1)
        def gumbel_loss(pred, label, beta=1.0):
            z = (label - pred) / beta
            max_z = torch.max(z)
            max_z = max_z.detach()
            loss = torch.exp(-max_z) - 1
            return loss
        gumbel_loss(net(torch.randn(4, 3)), torch.randn(4, 1)).mean().backward()
        """, "GT107", line=5, raises=(RuntimeError, "does not require grad"))),
    # MoleculeSTM (scripts/downstream_02_..._Latent_Optimization.py, demos/...): `text_repr`
    # from the text encoder before the loop, `optimizer = optim.Adam([latent])`, and each pass
    # `loss.backward(retain_graph=True)` then `optimizer.step()`: the step moves `latent`
    # only, which the kept graph of `text_repr` does not hold. Twin: the optimizer also holds
    # the text encoder's parameters: 'modified by an inplace operation'
    "kept-graph-holds-none-of-the-listed-tensors": (Shape("""
        text_model = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 3))
        def edit(text, init):
            text_repr = text_model(text)
            latent = init.detach().clone()
            latent.requires_grad = True
            optimizer = torch.optim.Adam([latent], lr=0.1)
            for _ in range(3):
                loss = (latent * text_repr).sum() + latent.pow(2).sum()
                optimizer.zero_grad()
                loss.backward(retain_graph=True)
                optimizer.step()
            return latent
        edit(torch.randn(2, 3), torch.randn(2, 3))
        """, "GT601"), Shape("""
        text_model = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 3))
        def edit(text, init):
            text_repr = text_model(text)
            latent = init.detach().clone()
            latent.requires_grad = True
            optimizer = torch.optim.Adam([latent, *text_model.parameters()], lr=0.1)
            for _ in range(3):
                loss = (latent * text_repr).sum() + latent.pow(2).sum()
                optimizer.zero_grad()
                loss.backward(retain_graph=True)
                optimizer.step()
            return latent
        edit(torch.randn(2, 3), torch.randn(2, 3))
        """, "GT601", line=8, raises=(RuntimeError, "modified by an inplace operation"))),
    # morl-baselines (common/model_based/probabilistic_ensemble.py): `loss =
    # self._compute_loss(batch_x, batch_y)` on tensors made by `th.from_numpy`, the method
    # running `self.forward(x)` and reading `self.max_logvar`: a method of the model, not a
    # parameter-free loss function named like one. Twin: the method never reads `self` (its
    # batches copied by `torch.tensor`: `torch.from_numpy` takes an array, which has no
    # history to lose, and is no cut since unseen32b)
    "loss-named-method-that-runs-the-model": (Shape("""
        class Ensemble(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 2)
                self.mu = nn.Parameter(torch.zeros(3), requires_grad=False)
            def forward(self, x):
                return self.fc(x - self.mu)
            def _fit_stats(self, data):
                self.mu.data = torch.tensor(np.mean(data, axis=0)).float()
            def _compute_loss(self, x, y):
                return F.mse_loss(self.forward(x), y)
            def fit(self, X, Y):
                self._fit_stats(X)
                opt = torch.optim.Adam(self.parameters())
                for i in range(3):
                    batch_x, batch_y = X[i:i + 2], Y[i:i + 2]
                    batch_x, batch_y = torch.from_numpy(batch_x).float(), torch.from_numpy(batch_y).float()
                    loss = self._compute_loss(batch_x, batch_y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
        Ensemble().fit(np.random.rand(6, 3).astype("float32"), np.random.rand(6, 2).astype("float32"))
        """, "GT104"), Shape("""
        class Ensemble(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 2)
                self.mu = nn.Parameter(torch.zeros(3), requires_grad=False)
            def forward(self, x):
                return self.fc(x - self.mu)
            def _fit_stats(self, data):
                self.mu.data = torch.tensor(np.mean(data, axis=0)).float()
            def _compute_loss(self, x, y):
                return F.mse_loss(x[:, :2], y)
            def fit(self, X, Y):
                self._fit_stats(X)
                opt = torch.optim.Adam(self.parameters())
                for i in range(3):
                    batch_x, batch_y = X[i:i + 2], Y[i:i + 2]
                    batch_x, batch_y = torch.tensor(batch_x).float(), torch.tensor(batch_y).float()
                    loss = self._compute_loss(batch_x, batch_y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
        Ensemble().fit(np.random.rand(6, 3).astype("float32"), np.random.rand(6, 2).astype("float32"))
        """, "GT104", line=17, raises=(RuntimeError, "does not require grad"))),
    # pixelsplat (src/loss/loss_depth.py): `near = batch["target"]["near"][..., None,
    # None].log()` then `depth = prediction.depth.minimum(far).maximum(near)`: the log reads an
    # entry of the batch, which takes no gradient. Twin: the log of the prediction, bounded
    # by `.maximum(...)`: a NaN gradient where the depth is 0
    "log-of-a-batch-entry-bounded-afterwards": (Shape("""
        def depth_loss(pred, batch):
            near = batch["near"][..., None].log()
            depth = pred.maximum(near)
            return depth.diff(dim=-1).abs().mean()
        pred = torch.rand(2, 5, requires_grad=True)
        depth_loss(pred, {"near": torch.full((2, 1), 0.5)}).backward()
        assert not torch.isnan(pred.grad).any()
        """, "GT754"), Shape("""
        def depth_loss(pred, batch):
            depth = torch.maximum(pred.log(), batch["near"][..., None])
            return depth.diff(dim=-1).abs().mean()
        pred = torch.rand(2, 5)
        pred[0, 0] = 0.0
        pred.requires_grad_()
        depth_loss(pred, {"near": torch.full((2, 1), 0.5)}).backward()
        """, "GT754", line=2, holds="torch.isnan(pred.grad).any()")),
    # SSLRec (trainer/trainer.py, CMLTrainer): a meta copy stepped by its own `meta_opt`, then
    # `behavior_loss_list[i] = (behavior_loss_list[i] * weights[i]).sum()` with `weights` from
    # `self.meta_weight_net`, `meta_loss = sum(behavior_loss_list) / n + ...`, backward and
    # `self.meta_opt.step()` (the weight net's): the loss has its optimizer, the meta copy's
    # gradient is a by-product. The element stores were not followed. Twin: the stored terms
    # do not read the weight net: the loss reaches only the meta copy, stepped before it
    "loss-summed-from-list-elements-stored-with-a-weight-net": (Shape("""
        class Trainer:
            def __init__(self, n):
                self.n = n
                self.weight_net = nn.Linear(2, 2)

            def create_optimizer(self, model):
                self.opt = torch.optim.AdamW(model.parameters())
                self.meta_opt = torch.optim.AdamW(self.weight_net.parameters())

            def train_epoch(self, model, loader):
                for x in loader:
                    meta_model = nn.Linear(2, 2)
                    meta_opt = torch.optim.AdamW(meta_model.parameters())
                    meta_model.load_state_dict(model.state_dict())
                    meta_loss1 = meta_model(x).pow(2).mean()
                    meta_opt.zero_grad(set_to_none=True)
                    self.meta_opt.zero_grad(set_to_none=True)
                    meta_loss1.backward()
                    meta_opt.step()
                    self.meta_opt.step()
                    losses = [None] * self.n
                    out = meta_model(x)
                    for i in range(self.n):
                        losses[i] = out[:, i]
                    weights, _w = self.weight_net(x).chunk(2, dim=1)
                    for i in range(self.n):
                        losses[i] = (losses[i] * weights[:, 0]).sum()
                    meta_loss = sum(losses) / self.n + 1e-3 * out.pow(2).mean()
                    self.meta_opt.zero_grad()
                    meta_loss.backward()
                    self.meta_opt.step()
                    loss = model(x).pow(2).mean()
                    self.opt.zero_grad()
                    loss.backward()
                    self.opt.step()

        t = Trainer(2)
        m = nn.Linear(2, 2)
        t.create_optimizer(m)
        t.train_epoch(m, [torch.randn(3, 2) for _ in range(2)])
        """, "GT522"), Shape("""
        class Trainer:
            def __init__(self, n):
                self.n = n
                self.weight_net = nn.Linear(2, 2)

            def create_optimizer(self, model):
                self.opt = torch.optim.AdamW(model.parameters())
                self.meta_opt = torch.optim.AdamW(self.weight_net.parameters())

            def train_epoch(self, model, loader):
                for x in loader:
                    meta_model = nn.Linear(2, 2)
                    meta_opt = torch.optim.AdamW(meta_model.parameters())
                    meta_model.load_state_dict(model.state_dict())
                    meta_loss1 = meta_model(x).pow(2).mean()
                    meta_opt.zero_grad(set_to_none=True)
                    self.meta_opt.zero_grad(set_to_none=True)
                    meta_loss1.backward()
                    meta_opt.step()
                    self.meta_opt.step()
                    losses = [None] * self.n
                    out = meta_model(x)
                    for i in range(self.n):
                        losses[i] = out[:, i]
                    weights, _w = self.weight_net(x).chunk(2, dim=1)
                    for i in range(self.n):
                        losses[i] = losses[i].sum()
                    meta_loss = sum(losses) / self.n + 1e-3 * out.pow(2).mean()
                    self.meta_opt.zero_grad()
                    meta_loss.backward()
                    self.meta_opt.step()
                    loss = model(x).pow(2).mean()
                    self.opt.zero_grad()
                    loss.backward()
                    self.opt.step()

        t = Trainer(2)
        m = nn.Linear(2, 2)
        t.create_optimizer(m)
        t.train_epoch(m, [torch.randn(3, 2) for _ in range(2)])
        """, "GT522", line=19)),
    # PINNacle (fbpinns/pdes/burger.py): `self.ic_cached = np.concatenate([self.ic_func(ic_x,
    # 0), ...])` from NumPy points, and `bd_loss(self, x, y)` with `ic_err = y[:2500] -
    # torch.tensor(self.ic_cached)`, `yp_err = y[2500:3500] - y[3500:4500]`, `l2_loss(torch.concat(
    # [...]), 0)`: `y` is the network's output (a difference of two slices of it is a loss term),
    # the NumPy array a fixed target. Twin: the output's own rows go through NumPy
    "periodic-term-of-the-output-beside-a-numpy-target": (Shape("""
        def l2_loss(a, b):
            return torch.mean((a - b) ** 2)
        class Burgers:
            def ic_func(self, pts, k):
                return np.sin(pts[:, k:k + 1])
            def sample(self, pts):
                self.ic = np.concatenate([self.ic_func(pts, 0), self.ic_func(pts, 1)], axis=1)
            def bd_loss(self, x, y):
                ic_err = y[:4] - torch.tensor(self.ic)
                per_err = y[4:6] - y[6:8]
                total = torch.cat([ic_err, per_err], dim=0)
                return l2_loss(total, 0)
        p = Burgers()
        p.sample(np.random.rand(4, 2))
        y = torch.rand(8, 2, dtype=torch.float64, requires_grad=True)
        p.bd_loss(None, y).backward()
        assert y.grad[:4].abs().sum() > 0
        """, "GT103"), Shape("""
        def l2_loss(a, b):
            return torch.mean((a - b) ** 2)
        class Burgers:
            def ic_func(self, pts, k):
                return np.sin(pts[:, k:k + 1])
            def sample(self, pts):
                self.ic = np.zeros((4, 2))
            def bd_loss(self, x, y):
                ic_err = torch.from_numpy(np.abs(y[:4].detach().numpy() - self.ic))
                per_err = y[4:6] - y[6:8]
                return l2_loss(ic_err, 0) + l2_loss(per_err, 0)
        p = Burgers()
        p.sample(np.random.rand(4, 2))
        y = torch.rand(8, 2, dtype=torch.float64, requires_grad=True)
        p.bd_loss(None, y).backward()
        """, "GT103", line=9, holds="y.grad[:4].abs().sum() == 0")),
    # UniMatch (model/backbone/xception.py): `SeparableConv2d.forward` ends with `x =
    # self.bn2(x)` and, only under `if not self.activate_first:`, `x = self.relu2(x)`; every
    # `Block` passes its own default `activate_first=True`, so `x += skip` after
    # `self.sepconv3(x)` writes into a BatchNorm output, which backward does not need. The
    # branch's last binding was taken as what `forward` returns. Twin: the block builds the
    # separable conv with `activate_first=False`: the in-place add writes into the ReLU output
    "last-op-under-a-flag-the-constructor-turns-off": (Shape("""
        class SepConv(nn.Module):
            def __init__(self, c, activate_first=True):
                super().__init__()
                self.relu0 = nn.ReLU()
                self.conv = nn.Conv2d(c, c, 3, padding=1, bias=False)
                self.bn = nn.BatchNorm2d(c)
                self.relu2 = nn.ReLU(inplace=True)
                self.activate_first = activate_first
            def forward(self, x):
                if self.activate_first:
                    x = self.relu0(x)
                x = self.bn(self.conv(x))
                if not self.activate_first:
                    x = self.relu2(x)
                return x
        class Block(nn.Module):
            def __init__(self, c, activate_first=True):
                super().__init__()
                self.sep = SepConv(c, activate_first=activate_first)
            def forward(self, inp):
                skip = inp
                x = self.sep(inp)
                x += skip
                return x
        Block(2)(torch.randn(2, 2, 4, 4, requires_grad=True)).sum().backward()
        """, "GT603"), Shape("""
        class SepConv(nn.Module):
            def __init__(self, c, activate_first=True):
                super().__init__()
                self.relu0 = nn.ReLU()
                self.conv = nn.Conv2d(c, c, 3, padding=1, bias=False)
                self.bn = nn.BatchNorm2d(c)
                self.relu2 = nn.ReLU(inplace=True)
                self.activate_first = activate_first
            def forward(self, x):
                if self.activate_first:
                    x = self.relu0(x)
                x = self.bn(self.conv(x))
                if not self.activate_first:
                    x = self.relu2(x)
                return x
        class Block(nn.Module):
            def __init__(self, c, activate_first=True):
                super().__init__()
                self.sep = SepConv(c, activate_first=False)
            def forward(self, inp):
                skip = inp
                x = self.sep(inp)
                x += skip
                return x
        Block(2)(torch.randn(2, 2, 4, 4, requires_grad=True)).sum().backward()
        """, "GT603", line=23, raises=(RuntimeError, "modified by an inplace operation"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


# se3_diffusion (experiments/train_se3_diffusion.py): `loss, aux = self.update_fn(feats)`, the
# method running `loss.backward()` and the step, then `global_logs.append(loss)`: the loop
# trains, so what stays is the graph nodes of every step, not every step's saved activations
# (the wording for a loop with no backward at all)
TRAINS_IN_HELPER = '''
import torch
import torch.nn as nn
class Runner:
    def __init__(self):
        self.net = nn.Linear(3, 1)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
    def update_fn(self, x):
        self.opt.zero_grad()
        loss = self.net(x).pow(2).mean()
        loss.backward()
        self.opt.step()
        return loss, {}
    def forward_fn(self, x):
        return self.net(x).pow(2).mean(), {}
    def train_epoch(self, loader):
        logs = []
        for x in loader:
            loss, aux = self.STEP(x)
            logs.append(loss)
        return logs
'''


@pytest.mark.parametrize(("step", "words"), [
    ("update_fn", "graph nodes of every step stay reachable"),
    ("forward_fn", "no `backward()`, every step's saved activations stay in memory"),
])
def test_append_after_a_helper_that_backwards_says_graph_nodes(step: str, words: str) -> None:
    from gradtrace.lint import check_source
    found = check_source(TRAINS_IN_HELPER.replace("STEP", step), "shape.py", select=["GT505"])
    assert [(f.line, f.code) for f in found] == [(20, "GT505")]
    assert words in found[0].message


def test_numpy_call_on_a_converted_tensor_does_not_say_it_raises() -> None:
    """PINNacle's `np.isclose(x[:, 1].detach().cpu(), 1)` kind: NumPy is handed a converted
    value; the round trip cuts the term, nothing raises."""
    from gradtrace.lint import check_source
    src = PRELUDE + (
        "def l2_loss(a, b):\n"
        "    return torch.mean((a - b) ** 2)\n"
        "def bd_loss(y, ref):\n"
        "    err = torch.from_numpy(np.abs(y[:4].detach().numpy() - ref))\n"
        "    per = y[4:6] - y[6:8]\n"
        "    return l2_loss(err, 0) + l2_loss(per, 0)\n")
    found = check_source(src, "shape.py", select=["GT103"])
    assert len(found) == 1 and "Can't call numpy()" not in found[0].message
    assert "adds nothing to any gradient" in found[0].message
