"""Session 54, helper "speed54" (docs/triage/speed54.md): GT602/GT603's local instances of a
module class of the file are found from one search of the classes' lines, less the lines of
methods that hold no nested function (NOTE [instance bindings]). The findings are the start's:
a binding in a function, or in a function nested in a method, is followed; one in a method
itself is a module's own part (``class_writes``), not a local instance."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

GATE = """
    import torch
    from torch import nn
    class Gate(nn.Module):
        def forward(self, x):
            return torch.sigmoid(x)
"""

CASES = {
    "function": ("""
        def train(net, opt, x):
            gate = Gate()
            h = gate(net(x))
            h.mul_(2)
            h.sum().backward()
            opt.step()
        """, [11]),
    "nested-in-method": ("""
        class Trainer:
            def fit(self, net, opt, x):
                def step():
                    gate = Gate()
                    h = gate(net(x))
                    h.mul_(2)
                    h.sum().backward()
                    opt.step()
                step()
        """, [13]),
    "method": ("""
        class Trainer:
            def fit(self, net, opt, x):
                gate = Gate()
                h = gate(net(x))
                h.mul_(2)
                h.sum().backward()
                opt.step()
        """, []),
    "rebound-first": ("""
        def train(net, opt, x):
            gate = Gate()
            h = gate(net(x))
            h = h * 1
            h.mul_(2)
            h.sum().backward()
            opt.step()
        """, []),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_local_instance_writes(case: str) -> None:
    body, lines = CASES[case]
    src = textwrap.dedent(GATE) + textwrap.dedent(body)
    assert [f.line for f in check_source(src) if f.code == "GT602"] == lines
