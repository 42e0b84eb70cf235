"""Shapes that fired wrongly on the projects of docs/triage/unseen37b.md (session 37), each in
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
    # pathformer (`layers/Layer.py`, WeightGenerator): `self.memory = nn.Parameter(torch.randn(
    # num_nodes, mem_dim), requires_grad=True).to('cpu')`: the factory made the tensor on the
    # CPU, the move asks for the device it has and returns the Parameter itself (registered,
    # trained). Twin: the same move that also casts returns a plain copy, never registered
    "move-to-the-cpu-a-factory-made-it-on": (Shape("""
        class Gen(nn.Module):
            def __init__(self, n, d):
                super().__init__()
                self.memory = nn.Parameter(torch.randn(n, d), requires_grad=True).to(torch.device("cpu"))
                self.out = nn.Linear(d, 1)
            def forward(self):
                return self.out(self.memory).sum()
        m = Gen(5, 3)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        before = m.memory.detach().clone()
        m().backward()
        opt.step()
        """, "GT403", holds="not torch.equal(before, m.memory)"), Shape("""
        class Gen(nn.Module):
            def __init__(self, n, d):
                super().__init__()
                self.memory = nn.Parameter(torch.randn(n, d), requires_grad=True).to("cpu", torch.float64)
                self.out = nn.Linear(d, 1).double()
            def forward(self):
                return self.out(self.memory).sum()
        m = Gen(5, 3)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        before = m.memory.detach().clone()
        m().backward()
        opt.step()
        """, "GT403", line=4, holds="torch.equal(before, m.memory) and 'memory' not in dict(m.named_parameters())")),
    # DeCLIP (`prototype/solver/*_solver.py`): on a crashed loss the loop backwards and steps
    # once more, then reloads the last checkpoint and `continue`s, or raises when there is none
    # (`if path is not None: ...; continue` / `else: raise`): the loop's own backward further
    # down never runs after that one. Twin: the branch raises only when no checkpoint exists
    # and otherwise falls through to the second backward of the same graph
    "branch-ending-in-continue-or-raise-before-the-second-backward": (Shape("""
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        saved = {k: v.clone() for k, v in model.state_dict().items()}
        for step, x in enumerate(torch.randn(4, 8, 4)):
            loss = model(x).pow(2).mean()
            if step == 1:
                opt.zero_grad()
                loss.backward()
                opt.step()
                if saved is not None:
                    model.load_state_dict(saved)
                    continue
                else:
                    raise RuntimeError("no checkpoint to recover from")
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT509"), Shape("""
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        saved = {k: v.clone() for k, v in model.state_dict().items()}
        for step, x in enumerate(torch.randn(4, 8, 4)):
            loss = model(x).pow(2).mean()
            if step == 1:
                opt.zero_grad()
                loss.backward()
                opt.step()
                if saved is None:
                    raise RuntimeError("no checkpoint to recover from")
                model.load_state_dict(saved)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT509", line=8, raises=(RuntimeError, "backward through the graph a second time"))),
    # var-attn (`onmt/Trainer.py`): `model.zero_grad()`, a loss helper of another object that
    # backwards in shards, then `nans = [(name, p) for name, p in model.named_parameters() if
    # p.grad is not None and (p.grad != p.grad).any()]` and `for _, p in nans: p.grad[p.grad
    # != p.grad] = 0`: every element drawn has a `.grad` tensor. Twin: the same scrub over every
    # parameter writes into the None `.grad` of a layer the loss did not reach
    "nan-scrub-of-the-grads-a-comprehension-kept": (Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.used, self.spare = nn.Linear(4, 2), nn.Linear(4, 2)
            def forward(self, x):
                return self.used(x)
        def train(model, opt, data, shard_loss):
            for x in data:
                model.zero_grad()
                shard_loss(model, x)
                nans = [(n, p) for n, p in model.named_parameters()
                        if p.grad is not None and (p.grad != p.grad).any()]
                for _, p in nans:
                    p.grad[p.grad != p.grad] = 0
                opt.step()
        def shard_loss(model, x):
            model(x).pow(2).mean().backward()
        model = Net()
        train(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.randn(3, 8, 4), shard_loss)
        """, "GT553"), Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.used, self.spare = nn.Linear(4, 2), nn.Linear(4, 2)
            def forward(self, x):
                return self.used(x)
        def train(model, opt, data, shard_loss):
            for x in data:
                model.zero_grad()
                shard_loss(model, x)
                params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
                for _, p in params:
                    p.grad[p.grad != p.grad] = 0
                opt.step()
        def shard_loss(model, x):
            model(x).pow(2).mean().backward()
        model = Net()
        train(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.randn(3, 8, 4), shard_loss)
        """, "GT553", line=9, raises=(TypeError, "does not support item assignment"))),
    # vilbert-multi-task (`train_tasks.py`): `ReduceLROnPlateau` built under `if
    # args.lr_scheduler == "automatic":`, and the per-iteration bare `lr_scheduler.step()`
    # under `if "cosine" in args.lr_scheduler and global_step > warmpu_steps:`: "cosine" is no
    # part of "automatic", no run reaches both (the plateau steps with the score after
    # validation); each part of an `and` holds in its body. Twin: the bare step's
    # test is a part the plateau's setting holds ("auto"): TypeError (missing 'metrics')
    "bare-step-under-a-part-of-another-setting-string": (Shape("""
        import argparse
        args = argparse.Namespace(lr_scheduler="automatic")
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        if args.lr_scheduler == "automatic":
            sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="max")
        elif args.lr_scheduler == "cosine":
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
        for epoch in range(2):
            for x in torch.randn(2, 8, 4):
                loss = model(x).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                if "cosine" in args.lr_scheduler and epoch >= 0:
                    sched.step()
            if args.lr_scheduler == "automatic":
                sched.step(-loss.item())
        """, "GT531"), Shape("""
        import argparse
        args = argparse.Namespace(lr_scheduler="automatic")
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        if args.lr_scheduler == "automatic":
            sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="max")
        elif args.lr_scheduler == "cosine":
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
        for epoch in range(2):
            for x in torch.randn(2, 8, 4):
                loss = model(x).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                if "auto" in args.lr_scheduler and epoch >= 0:
                    sched.step()
            if args.lr_scheduler == "automatic":
                sched.step(-loss.item())
        """, "GT531", line=16, raises=(TypeError, "metrics"))),
    # xuance (`xuance/torch/learners/model_based/dreamer_v2_learner.py`): one optimizer per part
    # in a dict, `self.optimizer['model'].step()`, then the actor's and the critic's losses from
    # the entries 'for_actor' and 'for_critic' of a policy method that detaches the posteriors
    # it is given; each loss stepped by its own entry. Without the keyed steps the three
    # passes looked like one update through one graph. Twin: the critic's loss also reads the
    # actor's entry, whose graph the actor's backward freed
    "optimizers-kept-by-key-each-stepping-its-own-part": (Shape("""
        class Policy(nn.Module):
            def __init__(self):
                super().__init__()
                self.world, self.actor, self.critic = nn.Linear(4, 4), nn.Linear(4, 1), nn.Linear(4, 1)
            def model_forward(self, obs):
                h = torch.tanh(self.world(obs))
                return h - obs, h.mean(), h
            def actor_critic_forward(self, post):
                z = post.detach()
                return {"for_actor": [self.actor(z), torch.ones(1)], "for_critic": [self.critic(z), z.sum(-1, keepdim=True)]}
        def update(policy, optimizer, obs):
            po, pr, posteriors = policy.model_forward(obs)
            model_loss = po.pow(2).mean() + pr
            optimizer["model"].zero_grad()
            model_loss.backward()
            optimizer["model"].step()
            out = policy.actor_critic_forward(posteriors)
            objective, discount = out["for_actor"]
            qv, target = out["for_critic"]
            actor_loss = -(discount * objective).mean()
            optimizer["actor"].zero_grad()
            actor_loss.backward()
            optimizer["actor"].step()
            critic_loss = (qv - target.detach()).pow(2).mean()
            optimizer["critic"].zero_grad()
            critic_loss.backward()
            optimizer["critic"].step()
        pol = Policy()
        opts = {k: torch.optim.Adam(getattr(pol, m).parameters(), lr=1e-3)
                for k, m in (("model", "world"), ("actor", "actor"), ("critic", "critic"))}
        for obs in torch.randn(2, 8, 4):
            update(pol, opts, obs)
        """, "GT509"), Shape("""
        class Policy(nn.Module):
            def __init__(self):
                super().__init__()
                self.world, self.actor, self.critic = nn.Linear(4, 4), nn.Linear(4, 1), nn.Linear(4, 1)
            def model_forward(self, obs):
                h = torch.tanh(self.world(obs))
                return h - obs, h.mean(), h
            def actor_critic_forward(self, post):
                z = post.detach()
                return {"for_actor": [self.actor(z), torch.ones(1)], "for_critic": [self.critic(z), z.sum(-1, keepdim=True)]}
        def update(policy, optimizer, obs):
            po, pr, posteriors = policy.model_forward(obs)
            model_loss = po.pow(2).mean() + pr
            optimizer["model"].zero_grad()
            model_loss.backward()
            optimizer["model"].step()
            out = policy.actor_critic_forward(posteriors)
            objective, discount = out["for_actor"]
            qv, target = out["for_critic"]
            actor_loss = -(discount * objective).mean()
            optimizer["actor"].zero_grad()
            actor_loss.backward()
            optimizer["actor"].step()
            critic_loss = (qv - target.detach()).pow(2).mean() + objective.mean()
            optimizer["critic"].zero_grad()
            critic_loss.backward()
            optimizer["critic"].step()
        pol = Policy()
        opts = {k: torch.optim.Adam(getattr(pol, m).parameters(), lr=1e-3)
                for k, m in (("model", "world"), ("actor", "actor"), ("critic", "critic"))}
        for obs in torch.randn(2, 8, 4):
            update(pol, opts, obs)
        """, "GT509", line=24, raises=(RuntimeError, "backward through the graph a second time"))),
    # xuance (`xuance/torch/learners/multi_agent_rl/ippo_learner.py`, `iac_learner.py`): the
    # policy runs once on the batch, then `for group, n_agents in self.n_group_agents.items():`
    # each pass backpropagates the loss of `policy_outputs.distributions[group]`, its own
    # group's head, stepped by `self.optimizer[group]`: no pass runs through a graph an
    # earlier pass freed. Twin: every pass reads the same entry: 'backward through the graph
    # a second time' on the second pass
    "output-computed-once-each-pass-its-own-keys-entry": (Shape("""
        class Groups(nn.Module):
            def __init__(self, groups):
                super().__init__()
                self.heads = nn.ModuleDict({g: nn.Linear(4, 2) for g in groups})
            def forward(self, obs):
                return {g: torch.distributions.Categorical(logits=h(obs)) for g, h in self.heads.items()}
        class Out:
            def __init__(self, distributions):
                self.distributions = distributions
        model = Groups(["red", "blue"])
        optimizer = {g: torch.optim.Adam(model.heads[g].parameters(), lr=1e-3) for g in ("red", "blue")}
        obs, acts = torch.randn(8, 4), torch.randint(0, 2, (8,))
        policy_outputs = Out(model(obs))
        for group, n_agents in {"red": 2, "blue": 3}.items():
            dist = policy_outputs.distributions[group]
            loss = -(dist.log_prob(acts) * n_agents).mean()
            optimizer[group].zero_grad()
            loss.backward()
            optimizer[group].step()
        """, "GT507"), Shape("""
        class Groups(nn.Module):
            def __init__(self, groups):
                super().__init__()
                self.heads = nn.ModuleDict({g: nn.Linear(4, 2) for g in groups})
            def forward(self, obs):
                return {g: torch.distributions.Categorical(logits=h(obs)) for g, h in self.heads.items()}
        class Out:
            def __init__(self, distributions):
                self.distributions = distributions
        model = Groups(["red", "blue"])
        optimizer = {g: torch.optim.Adam(model.heads[g].parameters(), lr=1e-3) for g in ("red", "blue")}
        obs, acts = torch.randn(8, 4), torch.randint(0, 2, (8,))
        policy_outputs = Out(model(obs))
        for group, n_agents in {"red": 2, "blue": 3}.items():
            dist = policy_outputs.distributions["red"]
            loss = -(dist.log_prob(acts) * n_agents).mean()
            optimizer[group].zero_grad()
            loss.backward()
            optimizer[group].step()
        """, "GT507", line=13, raises=(RuntimeError, "backward through the graph a second time"))),
    # pyvene (`pyvene/models/interventions.py`, the boundless mask): `self.temperature` is an
    # `nn.Parameter` the caller anneals through `set_temperature(temp)` (`self.temperature.data
    # = temp`), read in `forward` as `torch.tensor(self.temperature)`: the copy keeps the
    # schedule out of the optimizer's reach. Twin: the method clamps the parameter's own value,
    # a parameter meant to train, which the copy leaves without a gradient
    "parameter-annealed-by-a-setter-copied-in-forward": (Shape("""
        class Mask(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.mask = nn.Parameter(torch.zeros(n))
                self.temperature = nn.Parameter(torch.tensor(1.0))
            def set_temperature(self, temp):
                self.temperature.data = temp
            def forward(self, base, source):
                m = torch.sigmoid(self.mask / torch.tensor(self.temperature))
                return (1 - m) * base + m * source
        mod = Mask(4)
        opt = torch.optim.SGD(mod.parameters(), lr=0.1)
        for step, (b, s) in enumerate(torch.randn(3, 2, 8, 4)):
            loss = mod(b, s).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            mod.set_temperature(torch.tensor(1.0 / (step + 2)))
        """, "GT110", holds="abs(mod.temperature.item() - 0.25) < 1e-6"), Shape("""
        class Mask(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.mask = nn.Parameter(torch.zeros(n))
                self.temperature = nn.Parameter(torch.tensor(1.0))
            def set_temperature(self, temp):
                self.temperature.data = self.temperature.data.clamp(min=0.05)
            def forward(self, base, source):
                m = torch.sigmoid(self.mask / torch.tensor(self.temperature))
                return (1 - m) * base + m * source
        mod = Mask(4)
        opt = torch.optim.SGD(mod.parameters(), lr=0.1)
        for step, (b, s) in enumerate(torch.randn(3, 2, 8, 4)):
            loss = mod(b, s).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            mod.set_temperature(torch.tensor(1.0 / (step + 2)))
        """, "GT110", line=9, holds="mod.temperature.grad is None")),
    # RecStudio (`recstudio/model/module/data_augmentation.py`): `self.augmentation_methods =
    # [Item_Crop(tao=tao), Item_Mask(mask_id, gamma=gamma), Item_Reorder(beta=beta)]`, modules
    # that hold numbers only; `mask_id` is stored and read only as the value written into the
    # masked positions of a tensor: no module, nothing the plain list leaves unregistered.
    # Twin: the masking module stores and calls a layer it is given: its weights are missing
    # from the holder's `parameters()`
    "plain-list-of-modules-holding-numbers-only": (Shape("""
        class Mask(nn.Module):
            def __init__(self, mask_id, gamma=0.5):
                super().__init__()
                self.gamma = gamma
                self.mask_id = mask_id
            def forward(self, seq):
                out = seq.clone()
                n = int(self.gamma * seq.size(1))
                out[:, :n] = self.mask_id
                return out
        class Crop(nn.Module):
            def __init__(self, tao=0.5):
                super().__init__()
                self.tao = tao
            def forward(self, seq):
                return seq[:, :max(1, int(self.tao * seq.size(1)))]
        class Augment(nn.Module):
            def __init__(self, mask_id):
                super().__init__()
                self.methods = [Crop(), Mask(mask_id)]
            def forward(self, seq):
                return self.methods[1](seq)
        aug = Augment(0)
        out = aug(torch.randint(1, 9, (2, 6)))
        """, "GT401", holds="out[:, :3].eq(0).all() and not list(aug.parameters())"), Shape("""
        class Mask(nn.Module):
            def __init__(self, proj, gamma=0.5):
                super().__init__()
                self.gamma = gamma
                self.proj = proj
            def forward(self, seq):
                out = self.proj(seq.float())
                n = int(self.gamma * seq.size(1))
                return out[:, n:]
        class Crop(nn.Module):
            def __init__(self, tao=0.5):
                super().__init__()
                self.tao = tao
            def forward(self, seq):
                return seq[:, :max(1, int(self.tao * seq.size(1)))]
        class Augment(nn.Module):
            def __init__(self, width):
                super().__init__()
                self.methods = [Crop(), Mask(nn.Linear(width, width))]
            def forward(self, seq):
                return self.methods[1](seq)
        aug = Augment(6)
        out = aug(torch.randint(1, 9, (2, 6)))
        """, "GT401", line=19, holds="not list(aug.parameters())")),
    # AutoDL-Projects (`xautodl/trade_models/quant_transformer.py`): the test epoch runs the
    # shared epoch function under `torch.no_grad()` as `train_or_test_epoch(loader,
    # **shared_kwards)` with `shared_kwards = {..., "is_train": False, "optimizer": None}`,
    # and the function backwards only `if is_train and optimizer is not None:`. Twin: the
    # dict passes the training flags: 'does not require grad' under no_grad
    "flags-passed-in-a-spread-dict-switch-the-backward-off": (Shape("""
        def run_epoch(model, loader, loss_fn, is_train, optimizer):
            for x, y in loader:
                loss = loss_fn(model(x), y)
                if is_train and optimizer is not None:
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            return loss.item()
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        data = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(2)]
        run_epoch(model, data, F.mse_loss, True, opt)
        with torch.no_grad():
            shared = {"model": model, "loss_fn": F.mse_loss, "is_train": False, "optimizer": None}
            run_epoch(loader=data, **shared)
        """, "GT210"), Shape("""
        def run_epoch(model, loader, loss_fn, is_train, optimizer):
            for x, y in loader:
                loss = loss_fn(model(x), y)
                if is_train and optimizer is not None:
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            return loss.item()
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        data = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(2)]
        run_epoch(model, data, F.mse_loss, True, opt)
        with torch.no_grad():
            shared = {"model": model, "loss_fn": F.mse_loss, "is_train": True, "optimizer": opt}
            run_epoch(loader=data, **shared)
        """, "GT210", line=13, raises=(RuntimeError, "does not require grad"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
