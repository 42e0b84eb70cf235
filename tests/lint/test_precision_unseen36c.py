"""Shapes that fired wrongly on the projects of docs/triage/unseen36c.md (session 36:
libraries with their own training loops, courses, Kaggle solutions), each in another spelling
than the project's and next to a buggy twin that is still reported. Every snippet runs on
real torch."""
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
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # pFedHN (`experiments/pfedhn/trainer.py`): the hypernetwork's optimizer is cleared after
    # the client's backward, then `torch.autograd.grad(...)` is written into each `p.grad`
    # before `optimizer.step()`: the step applies the written gradients. Twin: the gradients
    # written before the clear: the step applies nothing.
    "gradients-written-by-hand-after-the-clear": (Shape("""
        class HNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2, 8)
            def forward(self, e):
                out = self.fc(e)
                return {"weight": out[:6].view(2, 3), "bias": out[6:]}
        hnet, net = HNet(), nn.Linear(3, 2)
        optimizers = {"sgd": torch.optim.SGD(hnet.parameters(), lr=0.5)}
        kind = "sgd"
        optimizer = optimizers[kind]
        before = hnet.fc.weight.detach().clone()
        for step in range(2):
            weights = hnet(torch.ones(2))
            net.load_state_dict(weights)
            inner_optim = torch.optim.SGD(net.parameters(), lr=0.1)
            for i in range(2):
                inner_optim.zero_grad()
                optimizer.zero_grad()
                loss = net(torch.randn(4, 3)).pow(2).mean()
                loss.backward()
                inner_optim.step()
            optimizer.zero_grad()
            final = net.state_dict()
            delta = [weights[k].detach() - final[k] for k in weights]
            grads = torch.autograd.grad(list(weights.values()), list(hnet.parameters()),
                                        grad_outputs=delta)
            for p, g in zip(hnet.parameters(), grads):
                p.grad = g
            optimizer.step()
        """, "GT503", holds="not torch.equal(before, hnet.fc.weight)"), Shape("""
        model = nn.Linear(3, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        before = model.weight.detach().clone()
        for step in range(2):
            loss = model(torch.randn(4, 3)).pow(2).mean()
            loss.backward()
            grads = [p.grad.clone() for p in model.parameters()]
            for p, g in zip(model.parameters(), grads):
                p.grad = g
            optimizer.zero_grad()
            optimizer.step()
        """, "GT503", line=10, holds="torch.equal(before, model.weight)")),
    # Deep-RL Hands-On (`Chapter19/04_train_ppo.py`): `calc_adv_ref(trajectory, net_crt,
    # states)` runs the critic only to read numbers (`.data.cpu().numpy()`) and returns new
    # tensors (`torch.FloatTensor(...).to(device)`): the actor's loss built from them before
    # `opt_crt.step()` holds none of the critic. Twin: the helper returns the critic's output
    # itself: the actor's backward after the critic's step raises.
    "advantages-rebuilt-from-the-critics-numbers": (Shape("""
        def calc_adv_ref(net_crt, states_v, device="cpu"):
            values = net_crt(states_v).squeeze(-1).data.cpu().numpy()
            adv = [float(v) * 0.5 for v in values]
            ref = [float(v) + 1.0 for v in values]
            return torch.FloatTensor(adv).to(device), torch.FloatTensor(ref).to(device)
        net_crt = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
        net_act = nn.Linear(3, 1)
        opt_crt = torch.optim.Adam(net_crt.parameters())
        opt_act = torch.optim.Adam(net_act.parameters())
        states = torch.randn(8, 3)
        for it in range(2):
            traj_adv_v, traj_ref_v = calc_adv_ref(net_crt, states)
            for epoch in range(2):
                batch_adv_v = traj_adv_v.unsqueeze(-1)
                opt_crt.zero_grad()
                loss_value_v = F.mse_loss(net_crt(states).squeeze(-1), traj_ref_v)
                loss_value_v.backward()
                opt_crt.step()
                opt_act.zero_grad()
                loss_policy_v = -(batch_adv_v * net_act(states)).mean()
                loss_policy_v.backward()
                opt_act.step()
        """, "GT609", holds="net_act.weight.grad is not None"), Shape("""
        def calc_adv_ref(net_crt, states_v):
            values = net_crt(states_v).squeeze(-1)
            return values * 0.5, values.detach() + 1.0
        net_crt = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
        net_act = nn.Linear(3, 1)
        opt_crt = torch.optim.Adam(net_crt.parameters())
        opt_act = torch.optim.Adam(net_act.parameters())
        states = torch.randn(8, 3)
        for it in range(2):
            traj_adv_v, traj_ref_v = calc_adv_ref(net_crt, states)
            for epoch in range(2):
                batch_adv_v = traj_adv_v.unsqueeze(-1)
                opt_crt.zero_grad()
                loss_value_v = F.mse_loss(net_crt(states).squeeze(-1), traj_ref_v)
                loss_value_v.backward()
                opt_crt.step()
                opt_act.zero_grad()
                loss_policy_v = -(batch_adv_v * net_act(states)).mean()
                loss_policy_v.backward()
                opt_act.step()
        """, "GT609", line=16, raises=(RuntimeError, "modified by an inplace operation"))),
    # pywick (`losses.py`, OHEM cross-entropy): `np.exp` of a NumPy copy of the softmax, then
    # `/=` on that array: NumPy's exp saves nothing for backward. Twin: `torch.exp` of the
    # logits written in place: backward raises.
    "numpy-exp-normalised-in-place": (Shape("""
        model = nn.Linear(4, 3)
        logits = model(torch.randn(5, 4))
        predict = F.softmax(logits, dim=1)
        x = predict.detach().cpu().numpy().T
        input_prob = np.exp(x - x.max(axis=0).reshape((1, -1)))
        input_prob /= input_prob.sum(axis=0).reshape((1, -1))
        keep = torch.from_numpy(input_prob.max(axis=0) > 0.0)
        loss = F.cross_entropy(logits[keep], torch.zeros(int(keep.sum()), dtype=torch.long))
        loss.backward()
        """, "GT602", holds="model.weight.grad is not None"), Shape("""
        model = nn.Linear(4, 3)
        logits = model(torch.randn(5, 4))
        input_prob = torch.exp(logits - logits.max())
        input_prob /= input_prob.sum(dim=1, keepdim=True)
        loss = -input_prob[:, 0].log().mean()
        loss.backward()
        """, "GT602", line=4, raises=(RuntimeError, "modified by an inplace operation"))),
    # FastEstimator (`op/tensorop/model/model.py`): `if self.gradients: data = self._forward(
    # data)` / `else: with torch.no_grad(): data = self._forward(data)`: one arm or the other
    # runs; the value with a graph is never rebound under no_grad. Twin: the output rebound
    # from itself under no_grad after the forward: the returned value has no graph.
    "graph-or-no-grad-forward-in-two-arms": (Shape("""
        class Op(nn.Module):
            def __init__(self, gradients):
                super().__init__()
                self.net = nn.Linear(3, 3)
                self.gradients = gradients
            def forward(self, data):
                if self.gradients:
                    data = self.net(data)
                else:
                    with torch.no_grad():
                        data = self.net(data)
                return data
        op = Op(True)
        op(torch.randn(2, 3)).sum().backward()
        """, "GT216", holds="op.net.weight.grad is not None"), Shape("""
        class Op(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(3, 3)
            def forward(self, data):
                data = self.net(data)
                with torch.no_grad():
                    data = data / data.norm()
                return data
        op = Op()
        op(torch.randn(2, 3)).sum().backward()
        """, "GT216", line=8, raises=(RuntimeError, "does not require grad"))),
    # ares (`attack/vmi_fgsm.py`): `sample = sample.detach()` opens every pass, then
    # `sample.requires_grad = True` and `sample = sample + noise`: the flag is set on a leaf
    # each time. Twin: no detach: the second pass sets the flag on the sum and raises.
    "detached-at-the-top-of-each-pass-before-the-flag": (Shape("""
        net = nn.Linear(3, 1)
        x = torch.randn(2, 3)
        sample = x.clone()
        total = torch.zeros_like(x)
        for j in range(3):
            sample = sample.detach()
            sample.requires_grad = True
            sample = sample + 0.1 * torch.rand_like(x)
            total += torch.autograd.grad(net(sample).sum(), sample)[0]
        """, "GT303", holds="total.abs().sum() > 0"), Shape("""
        net = nn.Linear(3, 1)
        x = torch.randn(2, 3)
        sample = x.clone()
        total = torch.zeros_like(x)
        for j in range(3):
            sample.requires_grad = True
            sample = sample + 0.1 * torch.rand_like(x)
            total += torch.autograd.grad(net(sample).sum(), sample)[0]
        """, "GT303", line=7, raises=(RuntimeError, "only change requires_grad flags of leaf"))),
    # ares (`attack/si_ni_fgsm.py`): the scale-invariant attack sums the input gradients of
    # `x_s = (adv / 2 ** j).requires_grad_(True)`, a new leaf on every pass, so `x_s.grad`
    # holds one backward each (and `torch.autograd.grad` reads no `.grad` at all). Twin: one
    # leaf made before the loop: its `.grad` sums every pass and the total counts them again.
    "input-gradients-of-fresh-leaves-summed": (Shape("""
        net = nn.Linear(3, 1)
        adv = torch.randn(2, 3)
        for i in range(2):
            grads = torch.zeros_like(adv)
            for j in range(3):
                x_s = (adv / 2 ** j).requires_grad_(True)
                loss = net(x_s).sum()
                loss.backward(retain_graph=True)
                grads += x_s.grad.detach()
                grads += torch.autograd.grad(loss, [x_s])[0].detach()
            adv = adv + 0.1 * grads.sign()
        """, "GT520", holds="torch.allclose(grads, 6 * net.weight.expand(2, 3))"), Shape("""
        net = nn.Linear(3, 1)
        adv = torch.randn(2, 3)
        for i in range(2):
            grads = torch.zeros_like(adv)
            x_s = adv.clone().requires_grad_(True)
            for j in range(3):
                loss = net(x_s / 2 ** j).sum()
                loss.backward()
                grads += x_s.grad.detach()
            adv = adv + 0.1 * grads.sign()
        """, "GT520", line=8, holds="not torch.allclose(grads, x_s.grad)")),
    # jionie/Bengaliai (`train.py`): each arm building a per-batch scheduler sets
    # `lr_scheduler_each_iter = True`, the one building `ReduceLROnPlateau` sets it False,
    # and the bare `scheduler.step()` runs under `if lr_scheduler_each_iter:`: never with the
    # plateau. Twin: the plateau's arm sets the flag True: the bare step raises.
    "per-batch-flag-set-false-with-the-plateau": (Shape("""
        def fit(name, epochs=2):
            model = nn.Linear(3, 1)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            if name == "cosine":
                scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, 10)
                lr_scheduler_each_iter = True
            elif name == "plateau":
                scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="max")
                lr_scheduler_each_iter = False
            for epoch in range(epochs):
                for x in torch.randn(3, 4, 3):
                    optimizer.zero_grad()
                    loss = model(x).pow(2).mean()
                    loss.backward()
                    optimizer.step()
                    if lr_scheduler_each_iter:
                        scheduler.step()
                if not lr_scheduler_each_iter:
                    scheduler.step(-loss.item())
            return model
        fit("plateau")
        fit("cosine")
        """, "GT531"), Shape("""
        def fit(name, epochs=2):
            model = nn.Linear(3, 1)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            if name == "cosine":
                scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, 10)
                lr_scheduler_each_iter = True
            elif name == "plateau":
                scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="max")
                lr_scheduler_each_iter = True
            for epoch in range(epochs):
                for x in torch.randn(3, 4, 3):
                    optimizer.zero_grad()
                    loss = model(x).pow(2).mean()
                    loss.backward()
                    optimizer.step()
                    if lr_scheduler_each_iter:
                        scheduler.step()
            return model
        fit("plateau")
        """, "GT531", line=17, raises=(TypeError, "metrics"))),
    # Hands-On GANs (`Chapter08/cats_dogs/advGAN.py`): the perturbation is generated in the
    # discriminator's `for i in range(1):` block and backwarded in the generator's: one pass
    # each, one backward of its graph. Twin: two passes: the second backward raises.
    "graph-backwarded-in-a-one-pass-loop": (Shape("""
        gen, disc = nn.Linear(3, 3), nn.Linear(3, 1)
        opt_g = torch.optim.Adam(gen.parameters())
        opt_d = torch.optim.Adam(disc.parameters())
        x = torch.randn(4, 3)
        for i in range(1):
            perturbation = gen(x)
            adv = torch.clamp(perturbation, -0.3, 0.3) + x
            opt_d.zero_grad()
            loss_d = disc(adv.detach()).pow(2).mean()
            loss_d.backward()
            opt_d.step()
        for i in range(1):
            opt_g.zero_grad()
            loss_g = (1 - disc(adv)).pow(2).mean() + perturbation.norm()
            loss_g.backward()
            opt_g.step()
        """, "GT507", holds="gen.weight.grad is not None"), Shape("""
        gen, disc = nn.Linear(3, 3), nn.Linear(3, 1)
        opt_g = torch.optim.Adam(gen.parameters())
        x = torch.randn(4, 3)
        perturbation = gen(x)
        for i in range(2):
            opt_g.zero_grad()
            loss_g = (1 - disc(perturbation + x)).pow(2).mean()
            loss_g.backward()
            opt_g.step()
        """, "GT507", line=4, raises=(RuntimeError, "backward through the graph a second time"))),
    # pywick (`testnets/opt_densenset.py`): `input_var = x.detach()`, then
    # `input_var.requires_grad = True` before the reentrant `checkpoint_sequential`: its input
    # requires grad, so the checkpointed layers train. Twin: the flag left off: they get no
    # gradient.
    "detached-input-asked-for-grad-before-checkpoint": (Shape("""
        from torch.utils.checkpoint import checkpoint_sequential
        features = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 3))
        x = torch.randn(4, 3)
        input_var = x.detach()
        input_var.requires_grad = True
        out = checkpoint_sequential(features, 2, input_var, use_reentrant=True)
        out.sum().backward()
        """, "GT205", holds="features[0].weight.grad is not None"), Shape("""
        from torch.utils.checkpoint import checkpoint_sequential
        features = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 3))
        head = nn.Linear(3, 1)
        x = torch.randn(4, 3)
        input_var = x.detach()
        out = checkpoint_sequential(features, 2, input_var, use_reentrant=True)
        head(out).sum().backward()
        """, "GT205", line=6, holds="features[0].weight.grad is None")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
