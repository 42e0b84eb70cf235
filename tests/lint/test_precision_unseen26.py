"""Shapes that fired wrongly on the projects of docs/triage/unseen26.md (session 26), each in
another spelling than the project's and next to a buggy twin that is still reported. Every
snippet runs on real torch."""
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
    # AgentFormer (model/dlow.py): the module keeps the batch in a dict attribute named
    # `data` and stores a distribution built from its layers there (`self.data['q_z'] =
    # Normal(mu=b, logvar=...)`): a dict entry, not a write through `Tensor.data`; the layers
    # train. Twin: the layer's output is written into a tensor through its `.data`: the layer
    # gets no gradient
    "module-dict-attribute-named-data": (Shape("""
        class Posterior(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(4, 2)
                self.data = {}
            def forward(self, x):
                mu = self.head(x)
                self.data['q_z'] = (mu, mu.pow(2).log())
                return self.data['q_z'][0].sum()
        net = Posterior()
        net(torch.randn(3, 4)).backward()
        """, "GT113", holds="net.head.weight.grad is not None"), Shape("""
        class Posterior(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(4, 2)
                self.out = nn.Linear(2, 1)
            def forward(self, x):
                h = torch.zeros(3, 2, requires_grad=True)
                mu = self.head(x)
                h.data[:, :] = mu
                return self.out(h).sum()
        net = Posterior()
        net(torch.randn(3, 4)).backward()
        """, "GT113", line=9, holds="net.head.weight.grad is None")),
    # FourCastNet (train.py): the constructor builds a ReduceLROnPlateau under `if
    # params.scheduler == 'ReduceLROnPlateau'` and keeps `self.params = params`; `train`
    # steps it without a metric only under `elif self.params.scheduler == 'CosineAnnealingLR'`:
    # one setting, two constants, the two never meet. Twin: the metric-less step is under the
    # plateau's own setting: TypeError
    "constructor-setting-kept-on-self": (Shape("""
        from types import SimpleNamespace
        class Trainer:
            def __init__(self, params, model):
                self.params = params
                self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
                if params.scheduler == 'plateau':
                    self.sched = torch.optim.lr_scheduler.ReduceLROnPlateau(self.opt)
                elif params.scheduler == 'cosine':
                    self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, 5)
            def end_epoch(self, val_loss):
                self.opt.step()
                if self.params.scheduler == 'plateau':
                    self.sched.step(val_loss)
                elif self.params.scheduler == 'cosine':
                    self.sched.step()
        for which in ('plateau', 'cosine'):
            Trainer(SimpleNamespace(scheduler=which), nn.Linear(2, 1)).end_epoch(1.0)
        """, "GT531"), Shape("""
        from types import SimpleNamespace
        class Trainer:
            def __init__(self, params, model):
                self.params = params
                self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
                if params.scheduler == 'plateau':
                    self.sched = torch.optim.lr_scheduler.ReduceLROnPlateau(self.opt)
                elif params.scheduler == 'cosine':
                    self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, 5)
            def end_epoch(self, val_loss):
                self.opt.step()
                if self.params.scheduler == 'plateau':
                    self.sched.step()
        Trainer(SimpleNamespace(scheduler='plateau'), nn.Linear(2, 1)).end_epoch(1.0)
        """, "GT531", line=13, raises=(TypeError, "metrics"))),
    # gmflow (main.py): `model = DataParallel(model)`, `model_without_ddp = model.module`, the
    # optimizer over `model_without_ddp.parameters()`, the clip over `model.parameters()`: a
    # wrapper's parameters are its module's, the stepped gradients are the clipped ones. Twin:
    # the clip is over another model: the stepped gradients stay unclipped
    "clip-through-the-wrapper-of-the-stepped-module": (Shape("""
        net = nn.Linear(4, 1)
        model = nn.DataParallel(net)
        model_without_ddp = model.module
        other = nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model_without_ddp.parameters(), lr=0.1)
        for _ in range(2):
            optimizer.zero_grad()
            (model(torch.randn(8, 4)) * 100).pow(2).mean().backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            norm = torch.cat([p.grad.flatten() for p in net.parameters()]).norm()
            optimizer.step()
        """, "GT549", holds="float(norm) <= 1.0 + 1e-4"), Shape("""
        net = nn.Linear(4, 1)
        model = nn.DataParallel(net)
        model_without_ddp = model.module
        other = nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model_without_ddp.parameters(), lr=0.1)
        for _ in range(2):
            optimizer.zero_grad()
            (model(torch.randn(8, 4)) * 100).pow(2).mean().backward()
            torch.nn.utils.clip_grad_norm_(other.parameters(), 1.0)
            norm = torch.cat([p.grad.flatten() for p in net.parameters()]).norm()
            optimizer.step()
        """, "GT549", line=9, holds="float(norm) > 1.0")),
    # MAAC (algorithms/attention_sac.py): `for a_i, nq, log_pi, (pq, regs) in zip(range(n),
    # next_qs, log_pis, critic_rets)` then `mse(pq, target_q.detach())`: `pq` is drawn from the
    # critic's outputs, not from the `range`; the loss keeps a live path through it. Twin: the
    # critic's prediction in the same zipped loop is detached too: backward raises
    "loop-target-zipped-with-a-range": (Shape("""
        critic = nn.Linear(4, 1)
        target_critic = nn.Linear(4, 1)
        def update(obs, rews):
            next_qs = [target_critic(o) for o in obs]
            critic_rets = [(critic(o), []) for o in obs]
            q_loss = 0
            for a_i, nq, (pq, regs) in zip(range(len(obs)), next_qs, critic_rets):
                target_q = rews[a_i] + 0.9 * nq
                q_loss += F.mse_loss(pq, target_q.detach())
            q_loss.backward()
        update([torch.randn(5, 4) for _ in range(2)], [torch.randn(5, 1) for _ in range(2)])
        """, "GT107", holds="critic.weight.grad is not None"), Shape("""
        def update(critic, target_critic, opt, obs, rews):
            next_qs = [target_critic(o) for o in obs]
            q_loss = 0
            for a_i, nq, o in zip(range(len(obs)), next_qs, obs):
                target_q = rews[a_i] + 0.9 * nq
                q_loss += F.mse_loss(critic(o).detach(), target_q.detach())
            opt.zero_grad()
            q_loss.backward()
            opt.step()
        critic, target = nn.Linear(4, 1), nn.Linear(4, 1)
        update(critic, target, torch.optim.SGD(critic.parameters(), lr=0.1),
               [torch.randn(5, 4) for _ in range(2)], [torch.randn(5, 1) for _ in range(2)])
        """, "GT107", line=6, raises=(RuntimeError, "does not require grad"))),
    # megablocks (layers/activation_fn.py): `def act_fn(x: stk.Matrix, ...)` then
    # `x.data.requires_grad = True`: `data` is the sparse matrix's own field, the same tensor at
    # each read, and the flag stays on it. Twin: the argument is a tensor: `x.data` is a new
    # tensor, the flag leaves the parameter frozen
    "data-field-of-an-annotated-non-tensor": (Shape("""
        class Blocks:
            def __init__(self, values):
                self.data = values
        def act_fn(x: Blocks, function):
            x.data.requires_grad = True
            return function(x.data)
        m = Blocks(torch.randn(6))
        act_fn(m, torch.relu).sum().backward()
        """, "GT469", holds="m.data.grad is not None"), Shape("""
        def act_fn(x: torch.Tensor, function):
            x.data.requires_grad = True
            return function(x.data)
        w = nn.Parameter(torch.randn(6), requires_grad=False)
        act_fn(w, torch.relu)
        """, "GT469", line=2, holds="not w.requires_grad")),
    # GDSS (trainer.py, toy/toy_main.py): `loss_x, loss_adj = self.loss_fn(model_x, model_adj,
    # x, adj)` (a loss function of another file), both backward passes, then each model's
    # optimizer steps: two models, two graphs that meet nowhere. Twin: one optimizer steps
    # both, and the second loss runs through the first's graph: backward raises
    "two-losses-of-two-models-then-two-steps": (Shape("""
        def fit(model1, model2, opt1, opt2, loss_fn, batches):
            for x in batches:
                opt1.zero_grad()
                opt2.zero_grad()
                loss1, loss2 = loss_fn(model1, model2, x)
                loss1.backward()
                loss2.backward()
                opt1.step()
                opt2.step()
        def separate(m1, m2, x):
            return m1(x).pow(2).mean(), m2(x).pow(2).mean()
        a, b = nn.Linear(4, 4), nn.Linear(4, 4)
        fit(a, b, torch.optim.SGD(a.parameters(), lr=0.1), torch.optim.SGD(b.parameters(), lr=0.1),
            separate, [torch.randn(3, 4) for _ in range(2)])
        """, "GT509", holds="a.weight.grad is not None and b.weight.grad is not None"), Shape("""
        def fit(model1, model2, opt, loss_fn, batches):
            for x in batches:
                opt.zero_grad()
                loss1, loss2 = loss_fn(model1, model2, x)
                loss1.backward()
                loss2.backward()
                opt.step()
        def shared(m1, m2, x):
            h = m1(x).tanh()
            return h.pow(2).mean(), m2(h).pow(2).mean()
        a, b = nn.Linear(4, 4), nn.Linear(4, 4)
        fit(a, b, torch.optim.SGD([*a.parameters(), *b.parameters()], lr=0.1), shared,
            [torch.randn(3, 4) for _ in range(2)])
        """, "GT509", line=5, raises=(RuntimeError, "second time"))),
    # LaneGCN (lanegcn.py, `PredLoss`): the distance of each predicted mode's endpoint to the
    # ground truth, `torch.sqrt(((reg - gt) ** 2).sum(1))`, only picks the closest mode
    # (`dist.min(1)`) and builds masks (`min_dist < th`): no gradient reaches the root, a mode
    # exactly on its target is harmless. Twin: the closest distance is the loss: NaN gradient
    "distance-only-picks-the-closest-mode": (Shape("""
        def pred_loss(reg, gt):
            dist = []
            for j in range(reg.shape[1]):
                dist.append(torch.sqrt(((reg[:, j] - gt) ** 2).sum(1)))
            dist = torch.cat([x.unsqueeze(1) for x in dist], 1)
            min_dist, min_idcs = dist.min(1)
            mask = (min_dist < 2.0) & (dist.max(1)[0] - min_dist > 0.0)
            rows = torch.arange(len(min_idcs))
            return F.smooth_l1_loss(reg[rows, min_idcs][mask], torch.zeros(4, 2)[mask])
        reg = torch.zeros(4, 3, 2)
        reg[:, 1] = 1.0
        reg.requires_grad_()
        pred_loss(reg, torch.zeros(4, 2)).backward()
        """, "GT753", holds="bool(torch.isfinite(reg.grad).all())"), Shape("""
        def pred_loss(reg, gt):
            dist = []
            for j in range(reg.shape[1]):
                dist.append(torch.sqrt(((reg[:, j] - gt) ** 2).sum(1)))
            dist = torch.cat([x.unsqueeze(1) for x in dist], 1)
            min_dist, min_idcs = dist.min(1)
            mask = (min_dist < 2.0) & (dist.max(1)[0] - min_dist > 0.0)
            rows = torch.arange(len(min_idcs))
            return min_dist.mean()
        reg = torch.zeros(4, 3, 2)
        reg[:, 1] = 1.0
        reg.requires_grad_()
        pred_loss(reg, torch.zeros(4, 2)).backward()
        """, "GT753", line=4, holds="bool(torch.isnan(reg.grad).any())")),
    # BLiTZ (utils/variational_estimator.py, unseen24's leftover): `return np.array(y_hat),
    # (likelihood_cost + complexity_cost) / n, ...`: the predictions collected through NumPy
    # first, then the loss, built from `criterion(outputs, labels)` with a criterion passed in:
    # the caller backpropagates the second element. Twin: the loss is computed from the NumPy
    # copy too: it has no graph, backward raises
    "numpy-predictions-returned-before-the-loss": (Shape("""
        import numpy as np
        def sample_loss(model, x, y, criterion, n):
            cost = 0
            preds = []
            for _ in range(n):
                outputs = model(x)
                preds.append(outputs.detach().numpy())
                cost += criterion(outputs, y)
            return np.array(preds), cost / n
        model = nn.Linear(3, 1)
        _, loss = sample_loss(model, torch.randn(4, 3), torch.randn(4, 1), F.mse_loss, 2)
        loss.backward()
        """, "GT103", holds="model.weight.grad is not None"), Shape("""
        import numpy as np
        def sample_loss(model, x, y, criterion, n):
            cost = 0
            preds = []
            for _ in range(n):
                outputs = model(x)
                arr = outputs.detach().numpy()
                preds.append(arr)
                cost += criterion(torch.from_numpy(arr), y)
            return np.array(preds), cost / n
        model = nn.Linear(3, 1)
        _, loss = sample_loss(model, torch.randn(4, 3), torch.randn(4, 1), F.mse_loss, 2)
        loss.backward()
        """, "GT103", line=7, raises=(RuntimeError, "does not require grad"))),
    # epymarl (modules/critics/*_ns.py): per-agent critics in a plain list, but the class
    # overrides `parameters()` (and `state_dict`, `cuda`) to list them by hand: the optimizer
    # built on `critic.parameters()` holds and moves them. Twin: no override: `parameters()`
    # is empty and the optimizer refuses it
    "plain-list-listed-by-its-own-parameters": (Shape("""
        class PerAgentCritic(nn.Module):
            def __init__(self, n_agents):
                super().__init__()
                self.n_agents = n_agents
                self.critics = [nn.Linear(4, 1) for _ in range(n_agents)]
            def forward(self, obs):
                return torch.cat([self.critics[i](obs[:, i]) for i in range(self.n_agents)], 1)
            def parameters(self):
                params = list(self.critics[0].parameters())
                for i in range(1, self.n_agents):
                    params += list(self.critics[i].parameters())
                return params
        critic = PerAgentCritic(3)
        opt = torch.optim.Adam(critic.parameters(), lr=0.1)
        before = critic.critics[2].weight.detach().clone()
        critic(torch.randn(5, 3, 4)).pow(2).mean().backward()
        opt.step()
        """, "GT401", holds="not torch.equal(before, critic.critics[2].weight)"), Shape("""
        class PerAgentCritic(nn.Module):
            def __init__(self, n_agents):
                super().__init__()
                self.n_agents = n_agents
                self.critics = [nn.Linear(4, 1) for _ in range(n_agents)]
            def forward(self, obs):
                return torch.cat([self.critics[i](obs[:, i]) for i in range(self.n_agents)], 1)
        critic = PerAgentCritic(3)
        opt = torch.optim.Adam(critic.parameters(), lr=0.1)
        before = critic.critics[2].weight.detach().clone()
        critic(torch.randn(5, 3, 4)).pow(2).mean().backward()
        opt.step()
        """, "GT401", line=5, raises=(ValueError, "empty parameter list"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
