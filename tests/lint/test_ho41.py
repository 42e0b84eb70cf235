"""The static fact widened for held-out batch 41 (docs/triage/ho41.md): the positional arguments
before a ``*spread`` bind the first parameters (NOTE [arguments before a spread]), so a
parameter's kind is read through ``validate(model, *batch)`` and the evaluation a helper makes
through a method of the model's class (``model.decode()`` calling ``self.eval()``) is seen from
the training loop (GT516 on the ``train()`` that runs once, before the loop). Buggy twins on
their line and silent look-alikes; each snippet runs on real torch and the test checks what
the finding claims (the later passes train in eval mode, or not)."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace import check_source

torch = pytest.importorskip("torch")

SRC = '''
import torch
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.3), nn.Linear(8, 2))

    def forward(self, x):
        return self.body(x)

    def decode(self, x):
        self.eval()
        with torch.no_grad():
            return self.body(x).argmax(1)

class Checker:
    def score(self, net, x, y):
        return (net.decode(x) == y).float().mean().item()

class Loop:
    def __init__(self):
        self.checker = Checker()
        self.modes = []

    def fit(self, net, data, held, epochs=3):
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        {once}
        for epoch in range(epochs):
            {each}
            for x, y in data:
                self.modes.append(net.training)
                loss = nn.functional.cross_entropy(net(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            self.checker.score({args})

data = [(torch.randn(6, 4), torch.randint(0, 2, (6,))) for _ in range(2)]
held = (torch.randn(6, 4), torch.randint(0, 2, (6,)))
loop = Loop()
loop.fit(Net(), data, held)
'''


def _source(once: str, each: str, args: str) -> str:
    return textwrap.dedent(SRC).replace("{once}", once).replace("{each}", each) \
        .replace("{args}", args)


@pytest.mark.parametrize("once,each,args,line", [
    ("net.train()", "pass", "net, *held", 29),  # twin: the model before the spread
    ("net.train()", "pass", "net, held[0], held[1]", 29),  # twin: no spread (already seen)
    ("pass", "net.train()", "net, *held", None),  # look-alike: train() every pass
    ("net.train()", "pass", "*(net,) + held", None),  # the model inside the spread: unknown
])
def test_eval_through_a_method_after_a_spread(once: str, each: str, args: str,
                                              line: int | None) -> None:
    src = _source(once, each, args)
    got = [(f.code, f.line) for f in check_source(src, "prog.py") if f.code == "GT516"]
    namespace: dict = {"__name__": "prog"}
    exec(compile(src, "prog.py", "exec"), namespace)
    modes = namespace["loop"].modes
    if line is None:
        assert got == []
    else:
        assert got == [("GT516", line)]
        assert modes[:2] == [True, True] and not any(modes[2:])  # later passes in eval mode
    if each != "pass":
        assert all(modes)
