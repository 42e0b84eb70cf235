"""The lead's session-55 facts, each from a probe of benchmarks/probes/lead55 (real bugs on
torch 2.13), with buggy twins in other styles and silent look-alikes:
layers made by a class named as ``map``'s mapper (NOTE [mapped containers]); an in-place write
into a saved output of a layer's result in a method ``forward`` runs (``_in_training``); a
``.data`` of ``forward``'s own input in a module fed a layer's output (NOTE [input cut by a
helper]); a tensor detached in place, directly or by a callee (NOTE [detached in place]); a
helper of another file that swaps a submodule after the optimizer (NOTE [foreign module kinds])."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_paths, check_source
from gradtrace.lint.config import Settings

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F
"""

CASES = {
    # GT401: a layer class named as the mapper: the list holds unregistered layers
    "map_class": ("""
        class MLP(nn.Module):
            def __init__(self, dims):
                super().__init__()
                self.hidden = list(map(nn.Linear, dims[:-1], dims[1:]))

            def forward(self, x):
                for f in self.hidden:
                    x = f(x)
                return x
        """, "GT401", [7]),
    "map_own_class_tuple": ("""
        class Block(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.fc = nn.Linear(d, d)

            def forward(self, x):
                return x + self.fc(x)

        class Net(nn.Module):
            def __init__(self, widths):
                super().__init__()
                self.blocks = tuple(map(Block, widths))

            def forward(self, x):
                for b in self.blocks:
                    x = b(x)
                return x
        """, "GT401", [15]),
    "map_ok": ("""
        class MLP(nn.Module):
            def __init__(self, dims):
                super().__init__()
                self.sizes = list(map(int, dims))
                self.acts = list(map(nn.ReLU, [False] * 2))
                self.layers = nn.ModuleList(map(nn.Linear, dims[:-1], dims[1:]))

            def forward(self, x):
                for f, a in zip(self.layers, self.acts):
                    x = a(f(x))
                return x
        """, "GT401", []),
    # GT602: a saved output of a layer's result, written in place in a method forward runs
    "method_softmax_masked": ("""
        class Attend(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.proj = nn.Linear(d, d)

            def weights(self, x, mask):
                a = self.proj(x).softmax(dim=-1)
                a.masked_fill_(mask, 0.0)
                return a

            def forward(self, x, mask):
                return self.weights(x, mask) @ x
        """, "GT602", [11]),
    "method_sigmoid_view": ("""
        class Gate(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.score = nn.Linear(d, 1)

            def gate(self, x, pad):
                g = torch.sigmoid(self.score(x)).squeeze(-1)
                g[pad] = 0.0
                return g

            def forward(self, x, pad):
                return (self.gate(x, pad).unsqueeze(-1) * x).sum(1)
        """, "GT602", [11]),
    "method_saved_output_ok": ("""
        class Gate(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.score = nn.Linear(d, 1)
                self.scale = 2.0

            def gate(self, x, pad):
                g = torch.sigmoid(self.score(x)).squeeze(-1)
                return g.masked_fill(pad, 0.0)

            def prior(self, n):
                p = torch.sigmoid(torch.arange(n) * self.scale)
                p[0] = 0.0
                return p

            @torch.no_grad()
            def inspect(self, x):
                g = torch.sigmoid(self.score(x))
                g[g < 0.5] = 0.0
                return g

            def forward(self, x, pad):
                return (self.gate(x, pad) + self.prior(x.size(1))).unsqueeze(-1) * x
        """, "GT602", []),
    # GT105: `.data` of forward's own input, in a module given a layer's output
    "norm_input_data_held": ("""
        class RMSNorm(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.w = nn.Parameter(torch.ones(d))

            def forward(self, h):
                h = h.data
                return self.w * h / h.pow(2).mean(-1, keepdim=True).sqrt()

        class Block(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.fc = nn.Linear(d, d)
                self.norm = RMSNorm(d)

            def forward(self, x):
                h = F.gelu(self.fc(x))
                return self.norm(h)
        """, "GT105", [10]),
    "norm_input_data_sequential": ("""
        class Scale(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.g = nn.Parameter(torch.ones(d))

            def forward(self, x):
                return self.g * x.data

        model = nn.Sequential(nn.Linear(4, 8), Scale(8), nn.Linear(8, 1))
        """, "GT105", [10]),
    "norm_input_data_ok": ("""
        class StatNorm(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.g = nn.Parameter(torch.ones(d))

            def forward(self, x):
                mu = x.data.mean(-1, keepdim=True)
                return self.g * (x - mu)

        class RawScale(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.g = nn.Parameter(torch.ones(d))

            def forward(self, x):
                x = x.data
                return self.g * x

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.pre = RawScale(4)
                self.fc = nn.Linear(4, 8)
                self.norm = StatNorm(8)

            def forward(self, x):
                return self.norm(self.fc(self.pre(x)))
        """, "GT105", []),
    # GT107: the tensor detached in place, by the step itself or by a helper it calls
    "inline_detach_": ("""
        model = nn.Linear(4, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in [(torch.randn(3, 4), torch.tensor([0, 1, 0]))]:
            out = model(x)
            out.detach_()
            loss = F.cross_entropy(out, y)
            loss.backward()
            opt.step()
        """, "GT107", [8]),
    "helper_detach_": ("""
        def log_confidence(scores, log):
            scores.detach_()
            log.append(scores.softmax(-1).max(-1).values.mean().item())

        def train_step(model, opt, x, y, log):
            scores = model(x)
            log_confidence(scores, log)
            loss = F.cross_entropy(scores, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT107", [5]),
    "detach_ok": ("""
        def log_confidence(scores, log):
            scores = scores.clone()
            scores.detach_()
            log.append(scores.max().item())

        def record(t, log):
            t.detach_()
            log.append(t)

        def train_step(model, teacher, opt, x, y, log):
            scores = model(x)
            log_confidence(scores, log)
            target = teacher(x)
            target.detach_()
            loss = F.mse_loss(scores, target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            record(loss, log)
        """, "GT107", []),
    # GT528: a plain trainer class keeps the model's state on self in a method that backwards
    "trainer_state_on_self": ("""
        class Worker:
            def __init__(self, policy):
                self.policy = policy
                self.opt = torch.optim.Adam(policy.parameters())
                self.h = None

            def update(self, obs, ret):
                value, self.h = self.policy(obs, self.h)
                loss = (value - ret).pow(2).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()

        class Policy(nn.Module):
            def __init__(self):
                super().__init__()
                self.cell = nn.GRUCell(4, 8)
                self.v = nn.Linear(8, 1)

            def forward(self, x, h):
                h = self.cell(x, h)
                return self.v(h), h

        w = Worker(Policy())
        for _ in range(3):
            w.update(torch.randn(2, 4), torch.randn(2, 1))
        """, "GT528", [11]),
    "trainer_state_ok": ("""
        class Worker:
            def __init__(self, policy):
                self.policy = policy
                self.opt = torch.optim.Adam(policy.parameters())
                self.h = None
                self.g = None

            def act(self, obs):
                with torch.no_grad():
                    a, self.g = self.policy(obs, self.g)
                return a

            def update(self, obs, ret):
                value, h = self.policy(obs, self.h)
                self.h = h.detach()
                loss = (value - ret).pow(2).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()

        class Policy(nn.Module):
            def __init__(self):
                super().__init__()
                self.cell = nn.GRUCell(4, 8)
                self.v = nn.Linear(8, 1)

            def forward(self, x, h):
                h = self.cell(x, h)
                return self.v(h), h

        w = Worker(Policy())
        for _ in range(3):
            w.act(torch.randn(2, 4))
            w.update(torch.randn(2, 4), torch.randn(2, 1))
        """, "GT528", []),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_lead55_fact(name):
    src, code, want = CASES[name]
    text = textwrap.dedent(HEAD).lstrip("\n") + textwrap.dedent(src).lstrip("\n")
    found = sorted(f.line for f in check_source(text, "m.py") if f.code == code)
    assert found == want, [(f.code, f.line) for f in check_source(text, "m.py")]


HEADS = '''
import torch.nn as nn


def adapt_head(model, num_classes):
    model.fc = nn.Linear(model.fc.in_features, num_classes)
    return model
'''

TRAIN = '''
import torch
import torch.nn as nn
import torch.nn.functional as F

from heads55 import adapt_head

model = nn.Sequential()
model.fc = nn.Linear(8, 10)
{order}
for _ in range(2):
    x, y = torch.randn(4, 8), torch.randint(0, 3, (4,))
    loss = F.cross_entropy(model.fc(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
'''


@pytest.mark.parametrize("order, want", [
    ("optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\nadapt_head(model, 3)", [10]),
    ("adapt_head(model, 3)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)", []),
])
def test_helper_of_another_file_swaps_a_submodule_after_the_optimizer(tmp_imports, order,
                                                                        want):
    """`adapt_head` (heads55.py) assigns a new `nn.Linear` to its argument's `fc`: called
    after the optimizer, the new head's parameters are in no optimizer (torch 2.13: its
    weights never move); called before, the optimizer holds them."""
    (tmp_imports / "heads55.py").write_text(HEADS.lstrip("\n"))
    (tmp_imports / "train55.py").write_text(TRAIN.lstrip("\n").format(order=order))
    found = [f for f in check_paths([str(tmp_imports)], Settings()).findings
             if f.code == "GT404"]
    assert [f.line for f in found] == want
    if want:
        assert "model.fc" in found[0].message
        assert any(r.path.endswith("heads55.py") and r.line == 5 for r in found[0].related)
