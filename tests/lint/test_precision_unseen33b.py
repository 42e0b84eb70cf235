"""Shapes that fired wrongly on the projects of docs/triage/unseen33b.md (session 33), each in
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
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # project-NN-Pytorch-scripts (core_scripts/nn_manager/nn_manager.py): `if
    # args.size_accumulate_grad > 1:` divides the loss, backwards and steps under `% N`; its
    # `else:` backwards the plain loss and steps on every pass. The divided backward never
    # runs in a pass of the plain arm's step. Twin: the step after the two arms: every pass
    # steps the partial, scaled sum
    "plain-arm-steps-its-own-undivided-loss": (Shape("""
        class Cfg:
            accum = 1
        def run(model, opt, batches, cfg):
            steps = 0
            for i, (x, y) in enumerate(batches):
                if cfg.accum > 1:
                    if i % cfg.accum == 0:
                        opt.zero_grad()
                else:
                    opt.zero_grad()
                loss = F.mse_loss(model(x), y)
                if cfg.accum > 1:
                    loss = loss / cfg.accum
                    loss.backward()
                    if (i + 1) % cfg.accum == 0:
                        opt.step()
                        steps += 1
                else:
                    loss.backward()
                    opt.step()
                    steps += 1
            return steps
        net = nn.Linear(3, 1)
        data = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(4)]
        n = run(net, torch.optim.SGD(net.parameters(), lr=0.1), data, Cfg())
        """, "GT519", holds="n == 4"), Shape("""
        class Cfg:
            accum = 2
        def run(model, opt, batches, cfg):
            steps = 0
            for i, (x, y) in enumerate(batches):
                if i % cfg.accum == 0:
                    opt.zero_grad()
                loss = F.mse_loss(model(x), y)
                if cfg.accum > 1:
                    loss = loss / cfg.accum
                    loss.backward()
                else:
                    loss.backward()
                opt.step()
                steps += 1
            return steps
        net = nn.Linear(3, 1)
        data = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(4)]
        n = run(net, torch.optim.SGD(net.parameters(), lr=0.1), data, Cfg())
        """, "GT519", line=14, holds="n == 4")),
    # Diffusion-LM (improved-diffusion/scripts/infill_util.py): `langevin_fn3(...)` computes
    # `tgt_embs = model3(label_ids[...])` before its `with th.enable_grad():` loop of Adagrad
    # steps on the sample; the sampler of another file calls it inside `with th.no_grad():`
    # (the function turns grad on itself for that reason): `tgt_embs` has no graph to free.
    # Twin: the same steps without the function's `enable_grad`, called with grad on: the
    # second backward reaches the freed graph of the target embedding
    "target-embedded-before-the-functions-own-enable-grad": (Shape("""
        def guide(embed, head, labels, sample, steps=3):
            target = embed(labels)
            x = nn.Parameter(sample.clone())
            with torch.enable_grad():
                for _ in range(steps):
                    opt = torch.optim.Adagrad([x], lr=0.1)
                    opt.zero_grad()
                    loss = head(torch.cat([x, target], 1)).pow(2).mean()
                    loss.backward()
                    opt.step()
            return x.data
        def sample_loop(fn, n=3):
            x = torch.randn(2, 4)
            for _ in range(n):
                with torch.no_grad():
                    x = fn(x)
            return x
        embed, head = nn.Embedding(10, 4), nn.Linear(8, 1)
        labels = torch.tensor([1, 2])
        out = sample_loop(lambda s: guide(embed, head, labels, s))
        """, "GT507", holds="out.shape == (2, 4)"), Shape("""
        def guide(embed, head, labels, sample, steps=3):
            target = embed(labels)
            x = nn.Parameter(sample.clone())
            for _ in range(steps):
                opt = torch.optim.Adagrad([x], lr=0.1)
                opt.zero_grad()
                loss = head(torch.cat([x, target], 1)).pow(2).mean()
                loss.backward()
                opt.step()
            return x.data
        embed, head = nn.Embedding(10, 4), nn.Linear(8, 1)
        out = guide(embed, head, torch.tensor([1, 2]), torch.randn(2, 4))
        """, "GT507", line=2, raises=(RuntimeError, "backward through the graph a second time"))),
    # pytorch-maddpg (MADDPG.py): `update_policy` makes `c_loss = []`, then `for agent in
    # range(self.n_agents):` fits that agent's critic with `self.critic_optimizer[agent]` and
    # appends `loss_Q`; the list is returned and the caller rebinds it every step: one
    # iteration's graphs, one per learner. Twin: the losses kept on the object, which grows
    # with every call
    "losses-of-one-update-over-the-learners": (Shape("""
        class Agents:
            def __init__(self, n):
                self.critics = [nn.Linear(3, 1) for _ in range(n)]
                self.optims = [torch.optim.SGD(c.parameters(), lr=0.1) for c in self.critics]
            def update(self, x, y):
                losses = []
                for k in range(len(self.critics)):
                    self.optims[k].zero_grad()
                    loss = F.mse_loss(self.critics[k](x), y)
                    loss.backward()
                    self.optims[k].step()
                    losses.append(loss)
                return losses
        team = Agents(3)
        for _ in range(4):
            last = team.update(torch.randn(5, 3), torch.randn(5, 1))
        """, "GT505", holds="len(last) == 3"), Shape("""
        class Agents:
            def __init__(self, n):
                self.critics = [nn.Linear(3, 1) for _ in range(n)]
                self.optims = [torch.optim.SGD(c.parameters(), lr=0.1) for c in self.critics]
                self.history = []
            def update(self, x, y):
                for k in range(len(self.critics)):
                    self.optims[k].zero_grad()
                    loss = F.mse_loss(self.critics[k](x), y)
                    loss.backward()
                    self.optims[k].step()
                    self.history.append(loss)
        team = Agents(3)
        for _ in range(4):
            team.update(torch.randn(5, 3), torch.randn(5, 1))
        """, "GT505", line=12, holds="len(team.history) == 12 and team.history[0].grad_fn is not None")),
    # EasyEdit (easyeditor/models/dinm/dinm_main.py): `with torch.no_grad():` holds
    # `dict(tok(locality_texts))`, the step runs `dict(tok(...))` again with grad: GT218 took
    # the builtin (and the tokenizer) for the model the step trains. Here the no-grad term is a
    # frozen reference's agreement, by design. Twin: the reference run through the trained
    # network under the same `no_grad`: that term trains nothing
    "tokenized-batch-made-under-no-grad-and-again-with-grad": (Shape("""
        def tok(rows):
            return {"x": torch.tensor(rows), "y": torch.ones(len(rows), 1)}
        def step(net, frozen, opt, rows, ref_rows):
            with torch.no_grad():
                ref = dict(tok(ref_rows))
                ref_out = frozen(ref["x"])
            opt.zero_grad()
            batch = dict(tok(rows))
            fit = F.mse_loss(net(batch["x"]), batch["y"])
            drift = F.mse_loss(ref_out, ref["y"])
            loss = fit + 0.1 * drift
            loss.backward()
            opt.step()
        net, frozen = nn.Linear(2, 1), nn.Linear(2, 1)
        step(net, frozen, torch.optim.SGD(net.parameters(), lr=0.1), [[1., 2.], [3., 4.]],
             [[0., 1.]])
        """, "GT218", holds="net.weight.grad is not None"), Shape("""
        def tok(rows):
            return {"x": torch.tensor(rows), "y": torch.ones(len(rows), 1)}
        def step(net, opt, rows, ref_rows):
            with torch.no_grad():
                ref = dict(tok(ref_rows))
                ref_out = net(ref["x"]).sigmoid()
            opt.zero_grad()
            batch = dict(tok(rows))
            fit = F.mse_loss(net(batch["x"]), batch["y"])
            keep = F.mse_loss(ref_out, ref["y"])
            loss = fit + 0.1 * keep
            loss.backward()
            return keep.requires_grad
        net = nn.Linear(2, 1)
        kept = step(net, torch.optim.SGD(net.parameters(), lr=0.1), [[1., 2.], [3., 4.]], [[0., 1.]])
        """, "GT218", line=4, holds="kept is False")),
    # EasyEdit (easyeditor/models/grace/GRACE.py): the adaptor's `forward` calls
    # `self.add_key(...)` only under `elif self.iter == 0:` and a distance test; `add_key`
    # rebuilds `values` as a new Parameter, and the editor builds its optimizer over the
    # model's parameters after that first forward. Twin: the helper called on every forward:
    # each call replaces the Parameter the optimizer holds
    "parameter-grown-by-a-helper-forward-calls-conditionally": (Shape("""
        class Codebook(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.values = nn.Parameter(torch.zeros(0, d))
                self.step_no = 0
            def grow(self, v):
                self.values = nn.Parameter(torch.cat([self.values.data, v]))
            def forward(self, x):
                if self.step_no == 0:
                    self.grow(x[:1].detach())
                return x + self.values[-1]
        book = Codebook(3)
        for i in range(3):
            book.step_no = i
            out = book(torch.randn(2, 3))
            if i == 0:
                opt = torch.optim.SGD(book.parameters(), lr=0.1)
            opt.zero_grad()
            out.pow(2).sum().backward()
            opt.step()
        """, "GT445", holds="opt.param_groups[0]['params'][0] is book.values"), Shape("""
        class Codebook(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.values = nn.Parameter(torch.zeros(0, d))
            def grow(self, v):
                self.values = nn.Parameter(torch.cat([self.values.data, v]))
            def forward(self, x):
                self.grow(x[:1].detach())
                return x + self.values[-1]
        book = Codebook(3)
        book(torch.randn(2, 3))
        opt = torch.optim.SGD(book.parameters(), lr=0.1)
        for i in range(3):
            opt.zero_grad()
            book(torch.randn(2, 3)).pow(2).sum().backward()
            opt.step()
        """, "GT445", line=6, holds="opt.param_groups[0]['params'][0] is not book.values")),
    # RTSF (models/RMLP.py): `x += self.temporal(x.transpose(1, 2)).transpose(1, 2)` with
    # `temporal` a Sequential opening with `nn.Linear`: on a 3-D input the linear layer
    # multiplies a folded copy of the transposed view, which it saves instead of `x`.
    # Twin: the layer on `x` itself, whose saved input the write changes
    "linear-mixer-over-a-transposed-view-then-added-in-place": (Shape("""
        class Mixer(nn.Module):
            def __init__(self, length, width):
                super().__init__()
                self.temporal = nn.Sequential(nn.Linear(length, width), nn.ReLU(),
                                              nn.Linear(width, length))
                self.head = nn.Linear(length, 2)
            def forward(self, x):
                x += self.temporal(x.transpose(1, 2)).transpose(1, 2)
                return self.head(x.transpose(1, 2))
        net = Mixer(6, 8)
        net(torch.randn(4, 6, 3)).pow(2).mean().backward()
        """, "GT605", holds="net.temporal[0].weight.grad is not None"), Shape("""
        class Mixer(nn.Module):
            def __init__(self, length, width):
                super().__init__()
                self.channel = nn.Sequential(nn.Linear(length, width), nn.ReLU(),
                                             nn.Linear(width, length))
                self.head = nn.Linear(length, 2)
            def forward(self, x):
                x = x * 1.0
                x += self.channel(x)
                return self.head(x)
        net = Mixer(6, 8)
        net(torch.randn(4, 3, 6)).pow(2).mean().backward()
        """, "GT605", line=9, raises=(RuntimeError, "modified by an inplace operation"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
