"""Session 52's lead rules. GT401 through a helper that builds and returns the plain container
(NOTE [returned containers]): `self.layers = self._make_layers(sizes)` whose helper returns a
list of layers. On torch 2.13 the layers are missing from `parameters()` (checked below with
real torch on the buggy twin)."""
from __future__ import annotations

import textwrap

import pytest
import torch

from gradtrace.lint import check_source


def _codes(src: str, code: str) -> list[int]:
    return [f.line for f in check_source(textwrap.dedent(src), "m.py") if f.code == code]


METHOD = '''
import torch
import torch.nn as nn


class Stack(nn.Module):
    def __init__(self, sizes):
        super().__init__()
        self.blocks = {store}
        self.head = nn.Linear(sizes[-1], 1)

    def _build(self, sizes):
{body}

    def forward(self, x):
        for b in self.blocks:
            x = torch.relu(b(x))
        return self.head(x)
'''

BUGGY = {
    "comprehension": "        return [nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])]",
    "appended": ("        out = []\n        for a, b in zip(sizes, sizes[1:]):\n"
                 "            layer = nn.Linear(a, b)\n            out.append(layer)\n"
                 "        return out"),
    "dict": "        return {str(i): nn.Linear(a, a) for i, a in enumerate(sizes)}",
}


@pytest.mark.parametrize("body", sorted(BUGGY))
def test_helper_returned_plain_container_is_reported(body):
    src = METHOD.format(store="self._build(sizes)", body=BUGGY[body])
    assert _codes(src, "GT401") == [9]


def test_buggy_twin_misses_parameters_on_torch():
    ns: dict = {}
    exec(METHOD.format(store="self._build(sizes)", body=BUGGY["comprehension"]), ns)
    model = ns["Stack"]([4, 8, 8])
    assert len(list(model.parameters())) == 2  # only the head's weight and bias
    model(torch.randn(2, 4))


LOOKALIKES = {
    # the helper registers them
    "sequential": ("self._build(sizes)", "        return nn.Sequential(*[nn.Linear(a, b) "
                   "for a, b in zip(sizes, sizes[1:])])"),
    "wrapped at the store": ("nn.ModuleList(self._build(sizes))",
                             BUGGY["comprehension"]),
    "parameterless": ("self._build(sizes)", "        return [nn.ReLU() for _ in sizes]"),
    "one arm registers": ("self._build(sizes)", "        if len(sizes) > 2:\n"
                          "            return nn.ModuleList([nn.Linear(4, 4)])\n"
                          "        return [nn.Linear(4, 4)]"),
    "numbers": ("self._build(sizes)", "        return [a * b for a, b in zip(sizes, sizes[1:])]"),
}


@pytest.mark.parametrize("case", sorted(LOOKALIKES))
def test_registered_or_parameterless_lookalikes_are_silent(case):
    store, body = LOOKALIKES[case]
    assert _codes(METHOD.format(store=store, body=body), "GT401") == []


def test_module_function_builder_and_wrapped_later():
    src = '''
    import torch.nn as nn

    def make_heads(n):
        heads = []
        for _ in range(n):
            heads.append(nn.Linear(16, 2))
        return heads

    class Multi(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.heads = make_heads(n)

        def forward(self, x):
            return [h(x) for h in self.heads]
    '''
    assert _codes(src, "GT401") == [13]
    wrapped = src.replace("self.heads = make_heads(n)",
                          "self.heads = nn.ModuleList(make_heads(n))")
    assert _codes(wrapped, "GT401") == []


SALIENCY = '''
import torch
import torch.nn as nn


def saliency(model, ids, label):
    {prep}ids.requires_grad_(True)
    out = model(ids)
    out[0, label].backward()
    return ids.grad


def attribute_form(tokens):
    tokens.requires_grad = True
    return tokens


model = nn.Sequential(nn.Embedding(50, 4), nn.Flatten(), nn.Linear(12, 2))
saliency(model, torch.randint(0, 50, (1, 3)), 1)
attribute_form({other})
'''


def test_integer_argument_asked_for_grad_is_reported():
    src = SALIENCY.format(prep="", other="torch.arange(3)")
    assert _codes(src, "GT304") == [7, 14]
    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        torch.randint(0, 50, (1, 3)).requires_grad_(True)


def test_float_or_mixed_arguments_are_silent():
    src = SALIENCY.format(prep="ids = ids.float()\n    ", other="torch.randn(3)")
    assert _codes(src, "GT304") == []
    mixed = SALIENCY.format(prep="", other="torch.arange(3)") + \
        "saliency(model, torch.rand(1, 3), 0)\nattribute_form(torch.rand(3))\n"
    assert _codes(mixed, "GT304") == []
