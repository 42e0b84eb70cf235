"""Shapes that fired wrongly on the projects of docs/triage/unseen28.md (session 28), each in
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
    # deep-transfer-learning (MRAN/ResNet.py): pseudo-labels of the target batch taken as
    # `t_label = self.source_fc(target).data.max(1)[1]`: indices carry no gradient, with or
    # without `.data`. Twin: the `.data` values themselves reach the output: the layer before
    # them gets no gradient
    "data-read-only-for-argmax-labels": (Shape("""
        def class_mmd(a, b, labels):
            return (a.mean(0) - b.mean(0)).pow(2).sum() * labels.float().mean()
        class Pair(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 4)
                self.cls = nn.Linear(4, 3)
            def forward(self, src, tgt):
                s = self.body(src)
                t = self.body(tgt)
                guess = self.cls(t)
                guess = guess.data.max(1)[1]
                return self.cls(s), class_mmd(s, t, guess)
        net = Pair()
        out, aux = net(torch.randn(5, 4), torch.randn(5, 4))
        (out.sum() + aux).backward()
        assert net.body.weight.grad is not None
        """, "GT105"), Shape("""
        class Pair(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 4)
                self.cls = nn.Linear(4, 3)
            def forward(self, src):
                h = self.body(src).data
                return self.cls(h)
        net = Pair()
        net(torch.randn(5, 4)).sum().backward()
        """, "GT105", line=7, holds="net.body.weight.grad is None")),
    # apex in jukebox (tests/L0/run_amp/test_rnn.py): `output, _ = rnn(packed_seq, hidden)`
    # with `packed_seq = pack_padded_sequence(x, lens)`: the output is a PackedSequence, whose
    # `.data` field is the packed tensor with its history. Twin: a plain tensor's `.data`
    "data-field-of-a-packed-rnn-output": (Shape("""
        rnn = nn.GRU(3, 3)
        x = torch.randn(4, 2, 3, requires_grad=True)
        seq = nn.utils.rnn.pack_padded_sequence(x, torch.tensor([4, 3]))
        output, _ = rnn(seq)
        output.data.float().sum().backward()
        assert x.grad is not None
        """, "GT105"), Shape("""
        rnn = nn.GRU(3, 3)
        x = torch.randn(4, 2, 3, requires_grad=True)
        output, _ = rnn(x)
        output.data.float().sum().backward()
        """, "GT105", line=4, raises=(RuntimeError, "does not require grad"))),
    # PDEBench (models/fno/train.py, unet/train.py): one loss per batch, built and
    # backpropagated in `if training_type in ["autoregressive"]:` or in
    # `if training_type in ["single"]:`, never both. Twin: the second test also admits the
    # first setting: both blocks run and the second reuses the freed loss
    "two-backwards-under-disjoint-settings": (Shape("""
        def train(net, opt, batches, mode):
            for x, y in batches:
                loss = 0
                if mode in ["steps"]:
                    for k in range(2):
                        loss += F.mse_loss(net(x), y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                if mode in ["single"]:
                    loss += F.mse_loss(net(x), y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        batches = [(torch.randn(4, 3), torch.randn(4, 1))]
        train(net, opt, batches, "steps")
        train(net, opt, batches, "single")
        """, "GT509"), Shape("""
        def train(net, opt, batches, mode):
            for x, y in batches:
                loss = 0
                if mode in ["steps"]:
                    for k in range(2):
                        loss += F.mse_loss(net(x), y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                if mode in ["single", "steps"]:
                    loss += F.mse_loss(net(x), y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        batches = [(torch.randn(4, 3), torch.randn(4, 1))]
        train(net, opt, batches, "steps")
        """, "GT509", line=11, raises=(RuntimeError, "second time"))),
    # Stark's pytracking (libs/optimization.py): `self.x.requires_grad_(True)`, gradients
    # through it, then `self.x.detach_()` and `self.x += delta_x`: detach_ turns the flag
    # off, the update is allowed. Twin: no detach_: in-place on a leaf that requires grad
    "in-place-update-after-detach-in-place": (Shape("""
        class Solver:
            def __init__(self, x):
                self.x = x
            def run(self, target):
                self.x.requires_grad_(True)
                loss = ((self.x - target) ** 2).sum()
                g, = torch.autograd.grad(loss, self.x)
                self.x.detach_()
                self.x -= 0.1 * g
        s = Solver(torch.zeros(3))
        s.run(torch.ones(3))
        """, "GT302"), Shape("""
        class Solver:
            def __init__(self, x):
                self.x = x
            def run(self, target):
                self.x.requires_grad_(True)
                loss = ((self.x - target) ** 2).sum()
                g, = torch.autograd.grad(loss, self.x)
                self.x -= 0.1 * g
        s = Solver(torch.zeros(3))
        s.run(torch.ones(3))
        """, "GT302", line=8, raises=(RuntimeError, "leaf Variable that requires grad"))),
    # PointFlow (models/odefunc.py): Hutchinson noise made once per solve,
    # `self._e = torch.randn_like(y, requires_grad=True).to(y)` from the call's own input:
    # per-call noise, not a weight. Twin: the tensor made in `__init__` from a size: a
    # learnable vector the optimizer never sees
    "per-call-noise-made-like-the-input": (Shape("""
        class Div(nn.Module):
            def __init__(self):
                super().__init__()
                self.f = nn.Linear(3, 3)
                self._e = None
            def forward(self, t, states):
                y = states[0]
                if self._e is None:
                    self._e = torch.randn_like(y, requires_grad=True).to(y)
                return (self.f(y) * self._e).sum()
        m = Div()
        m(0.0, (torch.randn(2, 3),)).backward()
        assert len(list(m.parameters())) == 2
        """, "GT402"), Shape("""
        class Div(nn.Module):
            def __init__(self):
                super().__init__()
                self.f = nn.Linear(3, 3)
                self.e = torch.randn(3, requires_grad=True)
            def forward(self, y):
                return (self.f(y) * self.e).sum()
        m = Div()
        """, "GT402", line=5, holds="len(list(m.parameters())) == 2")),
    # differnet / cs-flow (freia_funcs.py): `self.variable_list = [Variable(requires_grad=True)
    # for v in variables]`, then `self.variable_list[i] = x` in `forward`: slots for the
    # activations of each call. Twin: the list holds the weights themselves
    "plain-list-of-activation-slots": (Shape("""
        class Graph(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList([nn.Linear(3, 3), nn.Linear(3, 3)])
                self.slots = [torch.zeros(0, requires_grad=True) for _ in range(3)]
            def forward(self, x):
                self.slots[0] = x
                for i, b in enumerate(self.blocks):
                    self.slots[i + 1] = b(self.slots[i])
                return self.slots[-1]
        g = Graph()
        g(torch.randn(2, 3)).sum().backward()
        assert len(list(g.parameters())) == 4
        """, "GT401"), Shape("""
        class Graph(nn.Module):
            def __init__(self):
                super().__init__()
                self.ws = [nn.Parameter(torch.randn(3, 3)) for _ in range(2)]
            def forward(self, x):
                for w in self.ws:
                    x = x @ w
                return x
        g = Graph()
        """, "GT401", line=4, holds="len(list(g.parameters())) == 0")),
    # FL-bench (src/client/fedpac.py): one optimizer over the body and the head (two
    # groups); `self.model.base.zero_grad()` between backward and step trains the head only
    # in the first rounds. Twin: the whole model is cleared: the step changes nothing
    "zero-grad-of-one-group-freezes-it": (Shape("""
        class Two(nn.Module):
            def __init__(self):
                super().__init__()
                self.base = nn.Linear(3, 3)
                self.head = nn.Linear(3, 1)
            def forward(self, x):
                return self.head(self.base(x))
        model = Two()
        opt = torch.optim.SGD([{"params": model.base.parameters()},
                               {"params": model.head.parameters(), "lr": 0.5}], lr=0.1)
        before = model.head.weight.detach().clone()
        for x, y in [(torch.randn(4, 3), torch.randn(4, 1))]:
            loss = F.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            model.base.zero_grad()
            opt.step()
        assert not torch.equal(before, model.head.weight)
        """, "GT503"), Shape("""
        class Two(nn.Module):
            def __init__(self):
                super().__init__()
                self.base = nn.Linear(3, 3)
                self.head = nn.Linear(3, 1)
            def forward(self, x):
                return self.head(self.base(x))
        model = Two()
        opt = torch.optim.SGD([{"params": model.base.parameters()},
                               {"params": model.head.parameters(), "lr": 0.5}], lr=0.1)
        before = model.head.weight.detach().clone()
        for x, y in [(torch.randn(4, 3), torch.randn(4, 1))]:
            loss = F.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            model.zero_grad()
            opt.step()
        """, "GT503", line=16, holds="torch.equal(before, model.head.weight)")),
    # FL-bench (src/client/pefll.py): a client embedding summed over a few batches with grad
    # on, then fed to the hyper-network whose generated weights are differentiated later: the
    # graph is the point. Twin: the sum is only returned as a score: every batch's graph is
    # held for nothing
    "batch-sum-fed-to-a-network": (Shape("""
        class Client:
            def __init__(self):
                self.encoder = nn.Linear(3, 2)
                self.hyper_net = nn.Linear(2, 4)
            def personalize(self, loader):
                emb = torch.zeros(2)
                for i, (x, y) in enumerate(loader):
                    emb += self.encoder(x).sum(dim=0)
                emb = emb / len(loader)
                self.weights = self.hyper_net(emb)
        c = Client()
        c.personalize([(torch.randn(4, 3), None)] * 2)
        g, = torch.autograd.grad(c.weights.sum(), c.encoder.weight)
        """, "GT505"), Shape("""
        class Client:
            def __init__(self):
                self.encoder = nn.Linear(3, 2)
                self.hyper_net = nn.Linear(2, 4)
            def score(self, loader):
                emb = torch.zeros(2)
                for i, (x, y) in enumerate(loader):
                    emb += self.encoder(x).sum(dim=0)
                return emb / len(loader)
        c = Client()
        s = c.score([(torch.randn(4, 3), None)] * 2)
        """, "GT505", line=8, holds="s.grad_fn is not None")),
    # Transolver (models/Transolver.py): `get_grid(data.pos)`: the distance from each mesh
    # point of the input to a fixed grid, computed by a layer-free helper of `forward` on the
    # raw input: no weight reaches the root. Twin: the helper is fed a layer's output, which
    # lands on a grid point: the layer's gradient is NaN
    "distance-feature-of-the-raw-input": (Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.ref = 3
                self.proj = nn.Linear(2 + 9, 1)
            def grid(self, pos):
                ref = torch.linspace(0, 1, self.ref)
                g = torch.stack(torch.meshgrid(ref, ref, indexing="ij"), -1).reshape(1, -1, 2)
                return torch.sqrt(torch.sum((pos[:, :, None, :] - g[:, None]) ** 2, dim=-1))
            def forward(self, data):
                pos, feats = data
                return self.proj(torch.cat([pos, self.grid(pos)], -1))
        net = Net()
        net((torch.zeros(1, 4, 2), None)).sum().backward()
        assert torch.isfinite(net.proj.weight.grad).all()
        """, "GT753"), Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.ref = 3
                self.lift = nn.Linear(2, 2)
                self.proj = nn.Linear(9, 1)
            def grid(self, pos):
                ref = torch.linspace(0, 1, self.ref)
                g = torch.stack(torch.meshgrid(ref, ref, indexing="ij"), -1).reshape(1, -1, 2)
                return torch.sqrt(torch.sum((pos[:, :, None, :] - g[:, None]) ** 2, dim=-1))
            def forward(self, data):
                pos, feats = data
                return self.proj(self.grid(self.lift(pos)))
        net = Net()
        nn.init.zeros_(net.lift.weight)
        nn.init.zeros_(net.lift.bias)
        net((torch.zeros(1, 4, 2), None)).sum().backward()
        """, "GT753", line=10, holds="torch.isnan(net.lift.weight.grad).any()")),
    # mPLUG-Owl (mplug_owl/modeling_mplug_owl.py): the abstractor's attention registers a
    # Grad-CAM hook under `if self.save_attention:`, a switch the file sets only to False;
    # `generate` runs the abstractor under `torch.no_grad()`. Twin: the switch is on: the hook
    # on a tensor without grad raises
    "hook-under-a-switch-left-off": (Shape("""
        class Attn(nn.Module):
            def __init__(self):
                super().__init__()
                self.q = nn.Linear(4, 4)
                self.keep_maps = False
                self.grads = None
            def keep(self, g):
                self.grads = g
            def forward(self, x):
                probs = torch.softmax(self.q(x), -1)
                if self.keep_maps:
                    probs.register_hook(self.keep)
                return probs
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.attn = Attn()
            def generate(self, x):
                with torch.no_grad():
                    return self.attn(x).argmax(-1)
        Model().generate(torch.randn(2, 4))
        """, "GT217"), Shape("""
        class Attn(nn.Module):
            def __init__(self):
                super().__init__()
                self.q = nn.Linear(4, 4)
                self.keep_maps = True
                self.grads = None
            def keep(self, g):
                self.grads = g
            def forward(self, x):
                probs = torch.softmax(self.q(x), -1)
                if self.keep_maps:
                    probs.register_hook(self.keep)
                return probs
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.attn = Attn()
            def generate(self, x):
                with torch.no_grad():
                    return self.attn(x).argmax(-1)
        Model().generate(torch.randn(2, 4))
        """, "GT217", line=12, raises=(RuntimeError, "doesn't require gradient"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
