"""recall31: the GT1 loss paths read one element of a tuple a grad-off function hands back
(NOTE [unpacked grad-off element]), and a comprehension's variables drawn from `enumerate` /
`zip` (the element from its iterable, the count as no tensor). Every snippet runs on real
torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
torch.manual_seed(0)
'''

LM = '''
        class TinyLM(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(4, 4)

            def forward(self, x):
                return self.head(x)

            @torch.no_grad()
            def generate(self, x):
                scores = []
                for _ in range(3):
                    scores.append(self(x))
                return x, scores

'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # generate() (HF-style, under @no_grad) hands back the prompt it was given and the scores
    # it made: policy-gradient code that trains on the scores trains nothing.
    # Look-alike: the loss is read from the first element, the tensor given in with a graph.
    "unpacked-no-grad-element": (Shape(LM + """
        model = TinyLM()
        enc = nn.Linear(4, 4)
        opt = torch.optim.SGD([*model.parameters(), *enc.parameters()], lr=0.1)
        seq, scores = model.generate(enc(torch.ones(2, 4)))
        loss = seq.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        """, "GT202", holds="enc.weight.grad is not None"), Shape(LM + """
        model = TinyLM()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        seq, scores = model.generate(torch.ones(2, 4))
        loss = -torch.stack([torch.log_softmax(s, -1) for s in scores]).mean()
        opt.zero_grad()
        loss.backward()
        """, "GT202", 9, raises=(RuntimeError, "does not require grad"))),
    # A list of detached outputs read through `enumerate` (the count weighting each element):
    # nothing of the loss is on the graph. Look-alike: the same over outputs with a graph.
    "comprehension-over-enumerate": (Shape("""
        net = nn.Linear(3, 3)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        outs = [net(torch.randn(2, 3)) for _ in range(3)]
        loss = torch.stack([o.pow(2).mean() * i for i, o in enumerate(outs)]).sum()
        opt.zero_grad()
        loss.backward()
        """, "GT107", holds="net.weight.grad is not None"), Shape("""
        net = nn.Linear(3, 3)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        outs = [net(torch.randn(2, 3)).detach() for _ in range(3)]
        loss = torch.stack([o.pow(2).mean() * i for i, o in enumerate(outs)]).sum()
        opt.zero_grad()
        loss.backward()
        """, "GT107", 3, raises=(RuntimeError, "does not require grad"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
