"""Readings of docs/triage/static24d.md (in-place writes into a saved output), each in
spellings the real-world cases do not use, as a buggy twin that real torch fails on and a
correct look-alike that runs; the checker reports the first and stays silent on the second."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
'''

MODIFIED = (RuntimeError, "modified by an inplace operation")

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT602, in a function: a sigmoid's output through a local in-place Dropout module
    # (reported where the flag is set). Look-alike: the Dropout is not in place
    "local-inplace-dropout-after-local-sigmoid": (Shape("""
        def step(x):
            lin = nn.Linear(4, 4)
            drop = nn.Dropout(0.5)
            h = torch.sigmoid(lin(x))
            h = drop(h)
            h.sum().backward()
            return lin.weight.grad
        g = step(torch.randn(8, 4))
        """, "GT602", holds="g is not None"), Shape("""
        def step(x):
            lin = nn.Linear(4, 4)
            drop = nn.Dropout(0.5, inplace=True)
            h = torch.sigmoid(lin(x))
            h = drop(h)
            h.sum().backward()
            return lin.weight.grad
        g = step(torch.randn(8, 4))
        """, "GT602", 3, raises=MODIFIED)),
    # GT602, a script's local ReLU then a local in-place LeakyReLU on its output. Look-alike:
    # GELU saves its input, not its output
    "script-inplace-leaky-after-relu-module": (Shape("""
        lin = nn.Linear(3, 3)
        act = nn.GELU()
        leaky = nn.LeakyReLU(0.1, inplace=True)
        y = act(lin(torch.randn(2, 3)))
        y = leaky(y)
        y.sum().backward()
        """, "GT602", holds="lin.weight.grad is not None"), Shape("""
        lin = nn.Linear(3, 3)
        act = nn.ReLU()
        leaky = nn.LeakyReLU(0.1, inplace=True)
        y = act(lin(torch.randn(2, 3)))
        y = leaky(y)
        y.sum().backward()
        """, "GT602", 3, raises=MODIFIED)),
    # GT602, a helper of the file clamps its parameter in place; the caller hands it a
    # sigmoid's output. Look-alike: the helper clones first
    "helper-clamps-sigmoid-output": (Shape("""
        def to_unit(t):
            t = t.clone()
            t.clamp_(0.05, 0.95)
            return t
        def train(net, x):
            probs = torch.sigmoid(net(x))
            probs = to_unit(probs)
            probs.log().sum().backward()
        net = nn.Linear(4, 1)
        train(net, torch.randn(5, 4))
        """, "GT602", holds="net.weight.grad is not None"), Shape("""
        def to_unit(t):
            t.clamp_(0.05, 0.95)
            return t
        def train(net, x):
            probs = torch.sigmoid(net(x))
            probs = to_unit(probs)
            probs.log().sum().backward()
        net = nn.Linear(4, 1)
        train(net, torch.randn(5, 4))
        """, "GT602", 2, raises=MODIFIED)),
    # GT603, a helper adds into its parameter; the caller passes a ReLU's output in a
    # module's forward. Look-alike: the ReLU comes after the helper
    "helper-adds-into-relu-output-in-forward": (Shape("""
        def shift(h, b):
            h += b
            return h
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.b = nn.Parameter(torch.ones(4))
            def forward(self, x):
                h = self.fc(x)
                h = shift(h, self.b)
                return F.relu(h)
        net = Net()
        net(torch.randn(3, 4)).sum().backward()
        """, "GT603", holds="net.fc.weight.grad is not None"), Shape("""
        def shift(h, b):
            h += b
            return h
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.b = nn.Parameter(torch.ones(4))
            def forward(self, x):
                h = F.relu(self.fc(x))
                h = shift(h, self.b)
                return h
        net = Net()
        net(torch.randn(3, 4)).sum().backward()
        """, "GT603", 2, raises=MODIFIED)),
    # GT602, a local model of the file whose forward ends in Tanh, its output handed to a
    # helper that scales in place. Look-alike: the helper writes through `.data`'s copy
    "helper-scales-local-model-tanh-output": (Shape("""
        def rescale(img):
            img = img * 127.5
            img.add_(127.5)
            return img
        class Gen(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.out = nn.Tanh()
            def forward(self, z):
                return self.out(self.fc(z))
        gen = Gen()
        fake = gen(torch.randn(2, 4))
        fake = rescale(fake)
        fake.mean().backward()
        """, "GT602", holds="gen.fc.weight.grad is not None"), Shape("""
        def rescale(img):
            img.mul_(127.5)
            img = img + 127.5
            return img
        class Gen(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.out = nn.Tanh()
            def forward(self, z):
                return self.out(self.fc(z))
        gen = Gen()
        fake = gen(torch.randn(2, 4))
        fake = rescale(fake)
        fake.mean().backward()
        """, "GT602", 2, raises=MODIFIED)),
    # GT610, a plain function of the file: backward on every call, the step only with an
    # optimizer; the evaluation call passes none and its gradient stays in `.grad` (torch
    # 2.13's zero_grad sets it to None). Look-alike: the backward is under the same `if`
    "loss-step-backward-without-optimizer": (Shape("""
        def loss_step(model, x, y, opt=None):
            loss = F.mse_loss(model(x), y)
            if opt is not None:
                loss.backward()
                opt.step()
                opt.zero_grad()
            return loss.item()
        net = nn.Linear(3, 1)
        sgd = torch.optim.SGD(net.parameters(), lr=0.1)
        x, y = torch.randn(4, 3), torch.randn(4, 1)
        loss_step(net, x, y, sgd)
        net.eval()
        val = loss_step(net, x, y)
        """, "GT610", holds="net.weight.grad is None"), Shape("""
        def loss_step(model, x, y, opt=None):
            loss = F.mse_loss(model(x), y)
            loss.backward()
            if opt is not None:
                opt.step()
                opt.zero_grad()
            return loss.item()
        net = nn.Linear(3, 1)
        sgd = torch.optim.SGD(net.parameters(), lr=0.1)
        x, y = torch.randn(4, 3), torch.randn(4, 1)
        loss_step(net, x, y, sgd)
        net.eval()
        val = loss_step(net, x, y)
        """, "GT610", 3, holds="net.weight.grad is not None and net.weight.grad.abs().sum() > 0")),
    # GT610 look-alike twin: the calls without an optimizer alternate with the one that
    # steps in the arms of one `if` (gradient accumulation, meant to sum)
    "accumulation-calls-in-if-arms": (Shape("""
        def loss_step(model, x, y, opt=None):
            loss = F.mse_loss(model(x), y) / 2
            loss.backward()
            if opt is not None:
                opt.step()
                opt.zero_grad()
        net = nn.Linear(3, 1)
        sgd = torch.optim.SGD(net.parameters(), lr=0.1)
        for i in range(4):
            x, y = torch.randn(4, 3), torch.randn(4, 1)
            if i % 2 == 0:
                loss_step(net, x, y)
            else:
                loss_step(net, x, y, sgd)
        """, "GT610", holds="net.weight.grad is None"), Shape("""
        def loss_step(model, x, y, opt=None):
            loss = F.mse_loss(model(x), y) / 2
            loss.backward()
            if opt is not None:
                opt.step()
                opt.zero_grad()
        net = nn.Linear(3, 1)
        sgd = torch.optim.SGD(net.parameters(), lr=0.1)
        for i in range(4):
            x, y = torch.randn(4, 3), torch.randn(4, 1)
            loss_step(net, x, y, sgd)
        with torch.enable_grad():
            loss_step(net, x, y, None)
        """, "GT610", 3, holds="net.weight.grad is not None")),
    # GT611, a criterion module gathers only the keys, the queries keep their graph: on real
    # torch (gloo, one rank) the key encoder gets no gradient. Look-alike: the local slot is
    # written back, the gradient flows through it
    "all-gather-buffers-replace-keys": (Shape("""
        import tempfile
        import torch.distributed as dist
        class KeyLoss(nn.Module):
            def forward(self, q, k):
                bufs = [torch.empty_like(k) for _ in range(dist.get_world_size())]
                dist.all_gather(bufs, k)
                bufs[dist.get_rank()] = k
                k = torch.stack(bufs).flatten(0, 1)
                return (q @ k.T).logsumexp(1).mean()
        dist.init_process_group("gloo", init_method="file://" + tempfile.mktemp(), rank=0,
                                world_size=1)
        try:
            enc_q, enc_k = nn.Linear(4, 3), nn.Linear(4, 3)
            x = torch.randn(6, 4)
            KeyLoss()(enc_q(x), enc_k(x)).backward()
        finally:
            dist.destroy_process_group()
        """, "GT611", holds="enc_k.weight.grad is not None"), Shape("""
        import tempfile
        import torch.distributed as dist
        class KeyLoss(nn.Module):
            def forward(self, q, k):
                bufs = [torch.empty_like(k) for _ in range(dist.get_world_size())]
                dist.all_gather(bufs, k)
                k = torch.stack(bufs).flatten(0, 1)
                return (q @ k.T).logsumexp(1).mean()
        dist.init_process_group("gloo", init_method="file://" + tempfile.mktemp(), rank=0,
                                world_size=1)
        try:
            enc_q, enc_k = nn.Linear(4, 3), nn.Linear(4, 3)
            x = torch.randn(6, 4)
            KeyLoss()(enc_q(x), enc_k(x)).backward()
        finally:
            dist.destroy_process_group()
        """, "GT611", 7, holds="enc_k.weight.grad is None and enc_q.weight.grad is not None")),
    # GT602, eigh saves both outputs; a helper of the file (no backward, no loss word)
    # flips the eigenvectors' sign in place, and its caller backpropagates. Look-alike: the
    # flip is out of place
    "helper-writes-eigh-vectors": (Shape("""
        def spectrum(m):
            vals, vecs = torch.linalg.eigh(m)
            vecs = vecs * -1.0
            return vals, vecs
        a = torch.randn(4, 4, requires_grad=True)
        sym = a @ a.T + torch.eye(4)
        vals, vecs = spectrum(sym)
        (vals.sum() + vecs.abs().sum()).backward()
        """, "GT602", holds="a.grad is not None"), Shape("""
        def spectrum(m):
            vals, vecs = torch.linalg.eigh(m)
            vecs.mul_(-1.0)
            return vals, vecs
        a = torch.randn(4, 4, requires_grad=True)
        sym = a @ a.T + torch.eye(4)
        vals, vecs = spectrum(sym)
        (vals.sum() + vecs.abs().sum()).backward()
        """, "GT602", 3, raises=MODIFIED)),
    # GT602, a helper called before a backward caps a sigmoid's output by index. Look-alike:
    # the helper runs only under no_grad
    "helper-caps-sigmoid-called-before-backward": (Shape("""
        def squash(z):
            p = torch.sigmoid(z)
            p[p > 0.9] = 0.9
            return p
        lin = nn.Linear(3, 2)
        x = torch.randn(5, 3)
        with torch.no_grad():
            shown = squash(lin(x))
        F.mse_loss(lin(x), shown).backward()
        """, "GT602", holds="lin.weight.grad is not None"), Shape("""
        def squash(z):
            p = torch.sigmoid(z)
            p[p > 0.9] = 0.9
            return p
        lin = nn.Linear(3, 2)
        x = torch.randn(5, 3) * 5
        out = squash(lin(x))
        out.sum().backward()
        """, "GT602", 3, raises=MODIFIED)),
    # GT612, an nn.Parameter in a function, zeroed with `.zero_()` at the top of a while
    # loop. Look-alike: the zeroing is guarded
    "parameter-grad-zeroed-before-first-backward": (Shape("""
        def fit(x, y, steps=3):
            w = nn.Parameter(torch.zeros(3, 1))
            i = 0
            while i < steps:
                if w.grad is not None:
                    w.grad.zero_()
                loss = ((x @ w - y) ** 2).mean()
                loss.backward()
                with torch.no_grad():
                    w -= 0.1 * w.grad
                i += 1
            return w
        w = fit(torch.randn(8, 3), torch.randn(8, 1))
        """, "GT612", holds="w.grad is not None"), Shape("""
        def fit(x, y, steps=3):
            w = nn.Parameter(torch.zeros(3, 1))
            i = 0
            while i < steps:
                w.grad.zero_()
                loss = ((x @ w - y) ** 2).mean()
                loss.backward()
                with torch.no_grad():
                    w -= 0.1 * w.grad
                i += 1
            return w
        w = fit(torch.randn(8, 3), torch.randn(8, 1))
        """, "GT612", 5, raises=(AttributeError, "'NoneType' object has no attribute 'zero_'"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
