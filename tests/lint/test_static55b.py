"""Static misses session 54 left (docs/triage/static55b.md): each shape with a buggy twin in
another style and a silent look-alike; the probes in benchmarks/probes/static55b/ ran on torch
2.13 (the crash text, or a run that ends)."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source


def _src(code: str) -> str:
    return textwrap.dedent(code).lstrip("\n")


def _found(src: str, *codes: str) -> list[tuple[str, int]]:
    return sorted((f.code, f.line) for f in check_source(_src(src), "m.py") if f.code in codes)


# -- 1. GT528: state on a layerless module, the graph brought by its input; a reset counts
# only if the script reaches it (NOTE [input fed by a layer], NOTE [unreached defs]) -------
LEAKY = """
import torch
import torch.nn as nn


class Leaky(nn.Module):
    def __init__(self, beta=0.9):
        super().__init__()
        self.beta = beta
        self.mem = torch.zeros(1)

    def clear(self):
        self.mem = torch.zeros(1)

    def forward(self, cur):
        mem = self.beta * self.mem + cur
        self.mem = mem
        return torch.sigmoid(mem)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.lif = Leaky()

    def forward(self, x):
        h = self.fc(x)
        return self.lif(h)


def clear_all(net):
    net.lif.clear()


net = Net()
opt = torch.optim.Adam(net.parameters())
for step in range(3):
    loss = net(torch.randn(2, 4)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    {after}
"""

NORM_FIRST = """
import torch
import torch.nn as nn


class RunningNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.mean = torch.zeros(4)

    def forward(self, x):
        m = 0.9 * self.mean + 0.1 * x.mean(0)
        self.mean = m
        return x - m


net = nn.Sequential({layers})
opt = torch.optim.Adam(net.parameters())
for step in range(3):
    loss = net(torch.randn(2, 4)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize(("src", "expected"), [
    # twin: the neuron after `self.fc`, its `clear()` called only by an uncalled helper
    (LEAKY.format(after="pass"), [("GT528", 16)]),
    # look-alike: the helper runs after every step
    (LEAKY.format(after="clear_all(net)"), []),
    # look-alike: the reset method called directly
    (LEAKY.format(after="net.lif.clear()"), []),
    # twin: a running mean after a trained layer in a Sequential (its input has a graph)
    (NORM_FIRST.format(layers="nn.Linear(4, 4), RunningNorm(), nn.Linear(4, 3)"),
     [("GT528", 12)]),
    # look-alike: the same module first, on the raw batch (no graph comes in)
    (NORM_FIRST.format(layers="RunningNorm(), nn.Linear(4, 3)"), []),
])
def test_state_fed_by_input(src: str, expected) -> None:
    assert _found(src, "GT528") == expected


# -- 3. GT401: layers kept in a list of `(name, layer)` pairs ------------------------------
PAIRS = """
import torch.nn as nn


class MultiHead(nn.Module):
    def __init__(self, tasks):
        super().__init__()
        self.trunk = nn.Linear(10, 16)
        self.heads = {heads}

    def forward(self, x):
        h = self.trunk(x)
        return {{name: head(h) for name, head in self.heads}}


model = MultiHead({{"age": 1, "mood": 5}})
"""


@pytest.mark.parametrize(("heads", "expected"), [
    # probes54 q08: a comprehension of pairs
    ("[(name, nn.Linear(16, n)) for name, n in tasks.items()]", [("GT401", 8)]),
    # twin: a literal of pairs
    ('[("age", nn.Linear(16, 1)), ("mood", nn.Linear(16, 5))]', [("GT401", 8)]),
    # look-alike: pairs of names and sizes (no layer in them)
    ("[(name, n) for name, n in tasks.items()]", []),
])
def test_layers_in_pairs(heads: str, expected) -> None:
    src = PAIRS.format(heads=heads)
    assert _found(src, "GT401") == expected
    if expected:  # no fix offered: a ModuleList cannot hold the pairs
        f = next(f for f in check_source(_src(src), "m.py") if f.code == "GT401")
        assert f.fix is None and "nn.ModuleDict" in f.message


# -- 4. GT602/GT603: block 0 of a ModuleList filled in a loop, its first pass decided -------
FIRST_BLOCK = """
import torch
import torch.nn as nn


class Fuse(nn.Module):
    def __init__(self, c=4, n=3):
        super().__init__()
        self.stages = nn.ModuleList()
        for k in range(n):
            if {test}:
                self.stages.append({first})
            else:
                self.stages.append(nn.Conv2d(c, c, 1))

    def forward(self, x):
        out = self.stages[0](x)
        for k in range(1, len(self.stages)):
            out += self.stages[k](x)
        return out


net = Fuse()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
loss = net(torch.randn(2, 4, 5, 5)).pow(2).mean()
loss.backward()
opt.step()
"""
SIGMOID_BLOCK = "nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.Sigmoid())"


@pytest.mark.parametrize(("test", "first", "expected"), [
    # twin (sotr in another spelling): block 0 ends in a sigmoid, `out +=` rewrites it
    ("not k", SIGMOID_BLOCK, [("GT602", 18)]),
    ("k == 0", SIGMOID_BLOCK, [("GT602", 18)]),
    # look-alike: block 0 is a bare convolution (its output is not saved)
    ("not k", "nn.Conv2d(c, c, 3, padding=1)", []),
    # look-alike: the sigmoid block is appended on every pass but the first
    ("k > 0", SIGMOID_BLOCK, []),
])
def test_first_appended_block(test: str, first: str, expected) -> None:
    assert _found(FIRST_BLOCK.format(test=test, first=first), "GT602", "GT603") == expected


# -- 3. GT220: a module of the script, held by the optimizer, run only under grad-off: in an
# object it was handed to, or in a decorated helper (NOTE [runs through a holder]) ---------
PROMPT_BANK = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class PromptBank:
    def __init__(self, encoder):
        self.encoder = encoder
        self._cache = {{}}

    def get(self, key, tokens):
        if key not in self._cache:
            with torch.inference_mode():
                self._cache[key] = self.encoder(tokens)
        return self._cache[key]


text_encoder = nn.Embedding(100, 16)
image_encoder = nn.Linear(32, 16)
proj = nn.Linear(16, 16)
bank = PromptBank(text_encoder)
opt = torch.optim.Adam([{params}*image_encoder.parameters(), *proj.parameters()], lr=1e-3)
before = text_encoder.weight.clone()
prompts = torch.randint(0, 100, (4, 5))
for _ in range(2):
    txt = proj(bank.get("classes", prompts).mean(1))
    loss = F.cross_entropy(image_encoder(torch.randn(8, 32)) @ txt.t(), torch.randint(0, 4, (8,)))
    opt.zero_grad()
    loss.backward()
    opt.step()
print(torch.equal(before, text_encoder.weight))
"""

EMBED = """
import torch
import torch.nn as nn

enc = nn.Linear(8, 8)
head = nn.Linear(8, 1)
opt = torch.optim.SGD(list(enc.parameters()) + list(head.parameters()), lr=0.1)


@torch.no_grad()
def embed(x):
    return enc(x)


for _ in range(3):
    x = torch.randn(4, 8)
    loss = head(embed(x)).pow(2).mean(){more}
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize(("src", "expected"), [
    # probes54 q10: the encoder the optimizer holds runs only in the holder's grad-off cache
    (PROMPT_BANK.format(params="*text_encoder.parameters(), "), [("GT220", 13)]),
    # look-alike: the text encoder is left out of the optimizer (frozen on purpose)
    (PROMPT_BANK.format(params=""), []),
    # twin: a helper decorated with no_grad is the module's only run
    (EMBED.format(more=""), [("GT220", 9)]),
    # look-alike: the same module also runs with grad for another term
    (EMBED.format(more=" + enc(x).pow(2).mean()"), []),
])
def test_module_run_only_without_grad_in_script(src: str, expected) -> None:
    assert _found(src, "GT220") == expected


# -- 4. GT462: one optimizer over one part of a model whose class freezes another part
# itself; a further part it runs is left out (NOTE [parts the model freezes]; rsl_rl) -------
LEARNER = """
import torch
import torch.nn as nn


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(6, 8)
        self.head = nn.Linear(8, 2)
        self.target = nn.Linear(6, 2)
        for p in self.target.parameters():
            p.requires_grad = False{more_frozen}

    def act(self, obs):
        return self.head(self.encoder(obs))

    def reference(self, obs):
        return self.target(obs)


class Learner:
    def __init__(self, agent):
        self.agent = agent
        self.opt = torch.optim.SGD(self.agent.head.parameters(), lr=0.1)

    def update(self, obs):
        loss = ((self.agent.act(obs) - self.agent.reference(obs)) ** 2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()


learner = Learner(Agent())
for _ in range(3):
    learner.update(torch.randn(4, 6))
"""
ENCODER_FROZEN = """
        self.encoder.requires_grad_(False)"""


@pytest.mark.parametrize(("src", "expected"), [
    # twin: the class freezes its target; the encoder it runs is in no optimizer
    (LEARNER.format(more_frozen=""), [("GT462", 24)]),
    # look-alike: the class freezes the encoder too: only the head is meant to train
    (LEARNER.format(more_frozen=ENCODER_FROZEN), []),
    # look-alike: no freeze anywhere in the class: a head trained alone is a common choice
    (LEARNER.format(more_frozen="").replace(
        "        for p in self.target.parameters():\n            p.requires_grad = False\n",
        ""), []),
])
def test_single_part_optimizer_beside_a_frozen_part(src: str, expected) -> None:
    assert _found(src, "GT462") == expected
