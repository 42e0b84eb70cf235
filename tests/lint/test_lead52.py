"""Session 52's lead rules. GT401 through a helper that builds and returns the plain container
(NOTE [returned containers]): `self.layers = self._make_layers(sizes)` whose helper returns a
list of layers. On torch 2.13 the layers are missing from `parameters()` (checked below with
real torch on the buggy twin)."""
from __future__ import annotations

import copy
import textwrap

import pytest
import torch
import torch.nn as nn

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


RESTORE = '''
import copy
import torch
import torch.nn as nn


def train(model, loader, val, epochs=4):
    opt = torch.optim.Adam(model.parameters(), 1e-2)
    best, best_loss = copy.deepcopy(model), float("inf")
    for epoch in range(epochs):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        v = nn.functional.mse_loss(model(val[0]), val[1]).item()
        if v < best_loss:
            best, best_loss = copy.deepcopy(model), v
        else:
            model = copy.deepcopy(best){after}
    return best
'''


def test_model_restored_in_the_loop_leaves_the_optimizer_stale():
    """NOTE [stale from the next pass]; on torch 2.13 the restored copy never moves."""
    assert _codes(RESTORE.format(after=""), "GT404") == [20]
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    model = copy.deepcopy(model)
    before = model.weight.detach().clone()
    for _ in range(2):
        model(torch.randn(4, 3)).sum().backward()
        opt.step()
    assert torch.equal(model.weight, before)


@pytest.mark.parametrize("after", [
    "\n            opt = torch.optim.Adam(model.parameters(), 1e-2)",  # rebuilt with it
    "\n            break",  # the loop ends there
])
def test_restore_with_a_new_optimizer_or_a_break_is_silent(after):
    assert _codes(RESTORE.format(after=after), "GT404") == []


def test_folds_that_build_both_in_the_loop_are_silent():
    src = '''
    import torch
    import torch.nn as nn

    for fold in range(3):
        model = nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            opt.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
    '''
    assert _codes(src, "GT404") == []


EMA_SCRIPT = '''
import copy
import torch
import torch.nn as nn


class EMA:
    def __init__(self, model, decay=0.99):
        self.decay = decay
        self.shadow = {keep}
        self.shadow.requires_grad_(False)

    @torch.no_grad()
    def update(self, model):
        for s, p in zip(self.shadow.parameters(), model.parameters()):
            s.mul_(self.decay).add_(p, alpha=1 - self.decay)


model = nn.Linear(4, 2)
opt = torch.optim.Adam(model.parameters())
ema = EMA(model)
for _ in range(3):
    loss = model(torch.randn(3, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    ema.update(model)
'''


def test_script_level_ema_that_freezes_the_student_is_reported():
    """GT428 at script level: the wrapper keeps `model` itself; on torch 2.13 the first
    backward raises (nothing requires grad)."""
    src = EMA_SCRIPT.format(keep="model")
    assert _codes(src, "GT428") == [11]
    with pytest.raises(RuntimeError, match="does not require grad"):
        exec(src, {})
    assert _codes(EMA_SCRIPT.format(keep="copy.deepcopy(model)"), "GT428") == []
