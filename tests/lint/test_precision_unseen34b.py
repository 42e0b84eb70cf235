"""Shapes that fired wrongly on the projects of docs/triage/unseen34b.md (session 34), each in
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
    # CodeBERT / CodeT5 / UniXcoder / LongCoder (`model.py`): the training arm of `forward`
    # returns a loss built from `out = self.decoder(...)`; the beam-search arm rebinds `out =
    # self.lsm(self.lm_head(h)).data` and hands it to a beam object: that `out` reaches no
    # return (the returns of another arm of the `if` do not count). Twin: the `.data` in the
    # training arm: the loss has no history
    "beam-arm-rebinds-a-name-the-training-arm-returns": (Shape("""
        class Beam:
            def __init__(self):
                self.best_ids = []
            def advance(self, logp):
                self.best_ids.append(int(logp.argmax()))
            def best(self):
                return torch.tensor(self.best_ids)
        class Gen(nn.Module):
            def __init__(self):
                super().__init__()
                self.dec = nn.Linear(4, 4)
                self.head = nn.Linear(4, 5)
                self.lsm = nn.LogSoftmax(dim=-1)
            def forward(self, x, y=None):
                if y is not None:
                    out = torch.tanh(self.dec(x))
                    logp = self.lsm(self.head(out))
                    return F.nll_loss(logp, y)
                else:
                    beam = Beam()
                    for i in range(x.shape[0]):
                        out = torch.tanh(self.dec(x[i:i + 1]))
                        out = self.lsm(self.head(out)).data
                        beam.advance(out)
                    preds = beam.best()
                    return preds
        net = Gen()
        net(torch.randn(3, 4), torch.tensor([0, 1, 2])).backward()
        preds = net(torch.randn(3, 4))
        """, "GT105", holds="net.dec.weight.grad is not None and preds.shape == (3,)"), Shape("""
        class Gen(nn.Module):
            def __init__(self):
                super().__init__()
                self.dec = nn.Linear(4, 4)
                self.head = nn.Linear(4, 5)
                self.lsm = nn.LogSoftmax(dim=-1)
            def forward(self, x, y):
                out = self.dec(x).data
                logp = self.lsm(self.head(torch.tanh(out)))
                return F.nll_loss(logp, y)
        net = Gen()
        net(torch.randn(3, 4), torch.tensor([0, 1, 2])).backward()
        """, "GT105", line=8, holds="net.dec.weight.grad is None")),
    # Image-Super-Resolution-via-Iterative-Refinement (`model/model.py`): the loop freezes
    # each parameter, then unfreezes those of the 'transformer' layers and collects them for
    # the optimizer: the last write of the pass decides, not every parameter is frozen. Twin:
    # no unfreeze: the optimizer holds frozen parameters only, nothing trains
    "freeze-loop-that-unfreezes-the-tuned-part": (Shape("""
        net = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
        tune_last = True
        if tune_last:
            params = []
            for k, v in net.named_parameters():
                v.requires_grad = False
                if k.startswith("1."):
                    v.requires_grad = True
                    params.append(v)
        else:
            params = list(net.parameters())
        opt = torch.optim.SGD(params, lr=0.1)
        before = net[1].weight.detach().clone()
        net(torch.randn(4, 3)).pow(2).mean().backward()
        opt.step()
        """, "GT431", holds="not torch.equal(before, net[1].weight)"), Shape("""
        net = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
        for k, v in net.named_parameters():
            v.requires_grad = False
        opt = torch.optim.SGD(filter(lambda p: p.requires_grad, net.parameters()), lr=0.1)
        """, "GT431", line=3, raises=(ValueError, "empty parameter list"))),
    # AudioCLIP (`ignite_trainer/_trainer.py`): a part is frozen so that the group filtered on
    # `p.requires_grad` leaves it out, then unfrozen for a group of its own (no weight decay):
    # the freeze was read. Twin: the unfreeze with nothing between: the frozen part trains
    "freeze-read-by-a-group-filter-then-undone": (Shape("""
        net = nn.Sequential()
        net.body, net.head = nn.Linear(3, 3), nn.Linear(3, 1)
        for p in net.body.parameters():
            p.requires_grad = False
        groups = [{"params": [p for p in net.parameters() if p.requires_grad]}]
        for p in net.body.parameters():
            p.requires_grad = True
        groups.append({"params": list(net.body.parameters()), "weight_decay": 0.0})
        opt = torch.optim.SGD(groups, lr=0.1, weight_decay=0.1)
        net(torch.randn(4, 3)).pow(2).mean().backward()
        opt.step()
        """, "GT432", holds="len(opt.param_groups[0]['params']) == 2"), Shape("""
        net = nn.Sequential()
        net.body, net.head = nn.Linear(3, 3), nn.Linear(3, 1)
        for p in net.body.parameters():
            p.requires_grad = False
        for p in net.parameters():
            p.requires_grad = True
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        before = net.body.weight.detach().clone()
        net(torch.randn(4, 3)).pow(2).mean().backward()
        opt.step()
        """, "GT432", line=6, holds="not torch.equal(before, net.body.weight)")),
    # DiffusionCLIP (`losses/clip_loss.py`): `img_angle = torch.acos(clamp(cos, -1, 1))` is
    # read only for its size (`.repeat(img_angle.size()[0], 1, 1)`); the loss is built from
    # the cosine: no gradient runs through the arc cosine. Twin: the loss built from the
    # angle: a cosine of exactly 1 gives an infinite gradient
    "arc-cosine-read-only-for-its-size": (Shape("""
        def direction_loss(a, b, ref):
            cos = torch.clamp(a @ b.T, min=-1.0, max=1.0)
            angle = torch.acos(cos)
            ref = ref.unsqueeze(0).repeat(angle.size()[0], 1)
            return (1 - cos * ref).mean()
        a = torch.tensor([[1.0, 0.0]], requires_grad=True)
        direction_loss(a, torch.tensor([[1.0, 0.0]]), torch.ones(1)).backward()
        """, "GT752", holds="torch.isfinite(a.grad).all()"), Shape("""
        def direction_loss(a, b):
            cos = torch.clamp(a @ b.T, min=-1.0, max=1.0)
            angle = torch.acos(cos)
            return angle.mean()
        a = torch.tensor([[1.0, 0.0]], requires_grad=True)
        direction_loss(a, torch.tensor([[1.0, 0.0]])).backward()
        """, "GT752", line=3, holds="not torch.isfinite(a.grad).all()")),
    # splade (`tasks/transformer_trainer.py`): `mpm = amp.MixedPrecisionManager(fp16)` (a
    # class of another file whose `backward(self, loss)` backwards the loss) made before the
    # loop, then `mpm.backward(loss)` on each pass: what is differentiated is `loss`, not
    # `mpm`. Twin: the same owner, but the features computed once before the loop
    "own-precision-manager-backwards-the-loss": (Shape("""
        class Manager:
            def __init__(self, active):
                self.active = active
            def backward(self, loss):
                loss.backward()
        def train(net, opt, xs):
            mpm = Manager(False)
            for x in xs:
                loss = net(x).pow(2).mean()
                mpm.backward(loss)
                opt.step()
                opt.zero_grad()
            return True
        net = nn.Linear(3, 1)
        ok = train(net, torch.optim.SGD(net.parameters(), lr=0.1), [torch.randn(2, 3)] * 3)
        """, "GT507", holds="ok"), Shape("""
        class Manager:
            def __init__(self, active):
                self.active = active
            def backward(self, loss):
                loss.backward()
        def train(net, head, opt, x):
            mpm = Manager(False)
            feats = net(x)
            for _ in range(3):
                loss = head(feats).pow(2).mean()
                mpm.backward(loss)
                opt.step()
                opt.zero_grad()
        net, head = nn.Linear(3, 3), nn.Linear(3, 1)
        train(net, head, torch.optim.SGD(head.parameters(), lr=0.1), torch.randn(2, 3))
        """, "GT507", line=8, raises=(RuntimeError, "second time"))),
    # transformer-time-series-prediction (`transformer-multistep.py`): the epoch loop calls
    # `train(data)`, a function of the script whose first line is `model.train()` on the
    # script's global model, then `evaluate(model, data)`: each pass trains in train mode.
    # Twin: `train` without it: from the second pass on the model trains in eval mode
    "script-train-helper-sets-the-global-models-mode": (Shape("""
        model = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5), nn.Linear(3, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        modes = []
        def train(data):
            model.train()
            modes.append(model.training)
            for x in data:
                opt.zero_grad()
                model(x).pow(2).mean().backward()
                opt.step()
        def evaluate(eval_model, data):
            eval_model.eval()
            with torch.no_grad():
                return sum(float(eval_model(x).sum()) for x in data)
        data = [torch.randn(4, 3)] * 2
        for epoch in range(3):
            train(data)
            val = evaluate(model, data)
        """, "GT516", holds="modes == [True, True, True]"), Shape("""
        model = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5), nn.Linear(3, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        modes = []
        def train(data):
            modes.append(model.training)
            for x in data:
                opt.zero_grad()
                model(x).pow(2).mean().backward()
                opt.step()
        def evaluate(eval_model, data):
            eval_model.eval()
            with torch.no_grad():
                return sum(float(eval_model(x).sum()) for x in data)
        data = [torch.randn(4, 3)] * 2
        for epoch in range(3):
            train(data)
            val = evaluate(model, data)
        """, "GT516", line=17, holds="modes == [True, False, False]")),
    # rectified-flow-pytorch (`train_mean_flow_ql.py`): `self.mean_flow_actor =
    # MeanFlow(self.actor, ...)` wraps the actor that `opt_actor` holds; the actor loss is
    # computed from the wrapper and stepped by `opt_actor` right after its backward. Twin: the
    # actor's step before the actor loss's backward: it finds cleared gradients, nothing trains
    "actor-stepped-through-the-wrapper-it-was-handed-to": (Shape("""
        class Flow(nn.Module):
            def __init__(self, net):
                super().__init__()
                self.net = net
            def forward(self, s):
                return torch.tanh(self.net(s))
        class Agent:
            def __init__(self):
                self.actor = nn.Linear(3, 2)
                self.flow = Flow(self.actor)
                self.critic = nn.Linear(5, 1)
                self.opt_actor = torch.optim.SGD(self.actor.parameters(), lr=0.1)
                self.opt_critic = torch.optim.SGD(self.critic.parameters(), lr=0.1)
            def learn(self, batches):
                for s, a, r in batches:
                    self.opt_critic.zero_grad()
                    q = self.critic(torch.cat([s, a], -1))
                    F.mse_loss(q, r).backward()
                    self.opt_critic.step()
                    actor_loss = -self.critic(torch.cat([s, self.flow(s)], -1)).mean()
                    actor_loss.backward()
                    self.opt_actor.step()
                    self.opt_actor.zero_grad()
        agent = Agent()
        before = agent.actor.weight.detach().clone()
        agent.learn([(torch.randn(4, 3), torch.randn(4, 2), torch.randn(4, 1))] * 2)
        """, "GT522", holds="not torch.equal(before, agent.actor.weight)"), Shape("""
        class Flow(nn.Module):
            def __init__(self, net):
                super().__init__()
                self.net = net
            def forward(self, s):
                return torch.tanh(self.net(s))
        class Agent:
            def __init__(self):
                self.actor = nn.Linear(3, 2)
                self.flow = Flow(self.actor)
                self.critic = nn.Linear(5, 1)
                self.opt_actor = torch.optim.SGD(self.actor.parameters(), lr=0.1)
                self.opt_critic = torch.optim.SGD(self.critic.parameters(), lr=0.1)
            def learn(self, batches):
                for s, a, r in batches:
                    self.opt_critic.zero_grad()
                    q = self.critic(torch.cat([s, a], -1))
                    F.mse_loss(q, r).backward()
                    self.opt_critic.step()
                    self.opt_actor.zero_grad()
                    self.opt_actor.step()
                    actor_loss = -self.critic(torch.cat([s, self.flow(s)], -1)).mean()
                    actor_loss.backward()
        agent = Agent()
        before = agent.actor.weight.detach().clone()
        agent.learn([(torch.randn(4, 3), torch.randn(4, 2), torch.randn(4, 1))] * 2)
        """, "GT522", line=21, holds="torch.equal(before, agent.actor.weight)")),
    # RepCONC (`finetune_repconc.py`): a `transformers.Trainer` subclass whose
    # `training_step` runs the backward itself (in `self._forward_backward`) and returns
    # `torch.tensor(total_loss)`, a number the trainer logs: nothing backpropagates it.
    # Twin: a `training_step` that runs no backward and returns the loss without history
    "trainer-step-that-backwards-itself-returns-a-number": (Shape("""
        class Finetuner:
            def __init__(self, model, opt):
                self.model, self.opt = model, opt
            def _forward_backward(self, x):
                loss = self.model(x).pow(2).mean()
                loss.backward()
                return loss.item()
            def training_step(self, x):
                total = self._forward_backward(x)
                return torch.tensor(total)
        net = nn.Linear(3, 1)
        t = Finetuner(net, torch.optim.SGD(net.parameters(), lr=0.1))
        logged = t.training_step(torch.randn(4, 3))
        t.opt.step()
        """, "GT104", holds="net.weight.grad is not None and logged.grad_fn is None"), Shape("""
        class Finetuner:
            def __init__(self, model, opt):
                self.model, self.opt = model, opt
            def training_step(self, x):
                loss = self.model(x).pow(2).mean()
                return torch.tensor(loss)
        net = nn.Linear(3, 1)
        t = Finetuner(net, torch.optim.SGD(net.parameters(), lr=0.1))
        t.training_step(torch.randn(4, 3)).backward()
        """, "GT104", line=6, raises=(RuntimeError, "does not require grad"))),
    # cycle-diffusion (latent-diffusion's `ddpm.py`, the samplers' `@torch.no_grad()` taken
    # off): the only eval call of the file is `self.first_stage_model = model.eval()`, a
    # frozen autoencoder kept inside the model; the model whose `p_sample` drops its noise is
    # never put in eval mode here. Twin: the model itself evaluated, then sampled: the
    # dropout still drops
    "frozen-part-kept-in-eval-not-the-model": (Shape("""
        class Sampler(nn.Module):
            def __init__(self, first_stage):
                super().__init__()
                self.first_stage = first_stage.eval()
                self.net = nn.Linear(4, 4)
            def p_sample(self, x, noise_dropout=0.5):
                noise = torch.randn_like(x)
                noise = F.dropout(noise, p=noise_dropout)
                return self.net(x) + noise
        m = Sampler(nn.Linear(4, 4))
        out = m.p_sample(torch.randn(2, 4))
        """, "GT548", holds="m.training and not m.first_stage.training"), Shape("""
        class Sampler(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(4, 4)
            def forward(self, x):
                return F.dropout(self.net(x), p=0.5)
        m = Sampler()
        m.eval()
        x = torch.randn(2, 8, 4)
        same = torch.equal(m(x), m(x))
        """, "GT548", line=6, holds="not same")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
