"""Session 49, helper recall49a: a walk of full backward hooks over a model's modules reaches
the in-place layers the model is built from (GT606, NOTE [layers a hook walk reaches]). Each
shape: a buggy twin with its code and lines, silent look-alikes."""
from __future__ import annotations

import textwrap

from gradtrace.lint import check_source


def _found(src: str, code: str = "GT606") -> list[int]:
    return sorted(f.line for f in check_source(textwrap.dedent(src)) if f.code == code)


# every leaf of a model of the file gets a full backward hook; a block of it holds an in-place
# activation, which writes its own (hooked, so wrapped) input
LEAVES = '''
import torch
from torch import nn


class Stage(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.lin = nn.Linear(width, width)
        self.act = {act}

    def forward(self, x):
        return self.act(self.lin(x)) + x


class Tower(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(3, 5)
        self.stage = Stage(5)
        self.out = nn.Linear(5, 1)

    def forward(self, x):
        return self.out(self.stage(self.inp(x)))


class Recorder:
    def __init__(self, net):
        self.seen = []
        for part in net.modules():
            if {test}:
                part.register_full_backward_hook(self.keep)

    def keep(self, module, grad_in, grad_out):
        self.seen.append(grad_out[0].norm())


tower = Tower()
rec = Recorder(tower)
tower(torch.randn(4, 3)).sum().backward()
'''


def test_every_leaf_hooked_reaches_the_inplace_activation_of_a_block():
    src = LEAVES.format(act="nn.ReLU(inplace=True)", test="len(list(part.children())) == 0")
    assert _found(src) == [10]


def test_every_module_hooked_reaches_it_too():
    src = LEAVES.format(act="nn.Hardtanh(inplace=True)", test="not list(part.children())")
    assert _found(src) == [10]


def test_out_of_place_activation_is_silent():
    assert _found(LEAVES.format(act="nn.ReLU()", test="len(list(part.children())) == 0")) == []


def test_class_filter_reaches_the_activation_fed_a_hooked_output():
    # only the linear layers are hooked, but `self.act(self.lin(x))` writes the hooked output
    assert _found(LEAVES.format(act="nn.ReLU(inplace=True)",
                                test="isinstance(part, nn.Linear)")) == [10]


def test_class_filter_and_activation_fed_a_sum_is_silent():
    src = LEAVES.format(act="nn.ReLU(inplace=True)", test="isinstance(part, nn.Linear)")
    src = src.replace("self.act(self.lin(x)) + x", "self.act(self.lin(x) * 2) + x")
    assert _found(src) == []


def test_class_filter_and_activation_fed_through_a_name():
    src = LEAVES.format(act="nn.ReLU(inplace=True)", test="isinstance(part, nn.Linear)")
    src = src.replace("return self.act(self.lin(x)) + x", "h = self.lin(x)\n        return self.act(h) + x")
    assert _found(src) == [10]


def test_walk_under_a_test_it_cannot_read_is_silent():
    # only the whole model passes the test: its input and output are wrapped, not the block's
    assert _found(LEAVES.format(act="nn.ReLU(inplace=True)", test="part is net")) == []


# a class filter: the in-place layer follows a hooked layer in an nn.Sequential, its flag a
# constant of the module
PICKED = '''
import torch
from torch.nn import LayerNorm, Linear, ReLU, Sequential

SHARP = True


class Tracker:
    def __init__(self, net):
        for label, sub in net.named_modules():
            if isinstance(sub, Linear):
                sub.register_full_backward_hook(self.note)

    def note(self, module, grad_in, grad_out):
        module.last = grad_out[0].detach()


net = Sequential(
    Linear(3, 4),
    {middle}
    Linear(4, 1),
)
Tracker(net)
net(torch.randn(2, 3)).sum().backward()
'''


def test_inplace_layer_right_after_a_hooked_layer():
    assert _found(PICKED.format(middle="ReLU(inplace=SHARP),")) == [20]


def test_inplace_layer_after_an_unhooked_layer_is_silent():
    assert _found(PICKED.format(middle="LayerNorm(4), ReLU(inplace=SHARP),")) == []


def test_flag_rebound_is_not_a_constant():
    src = PICKED.format(middle="ReLU(inplace=SHARP),").replace(
        "SHARP = True\n", "SHARP = True\nSHARP = not SHARP\n")
    assert _found(src) == []


# a recursive helper hooks a module when it has no children, else calls itself on them
RECURSIVE = '''
import torch
from torch import nn


class Probe:
    def __init__(self, model):
        self.model = model

    def attach(self, module):
        kids = list(module.children())
        if kids:
            return [h for kid in kids for h in self.attach(kid)]
        return [module.{register}(lambda m, gi, go: None)]

    def run(self, x):
        handles = self.attach(self.model)
        out = self.model(x).sum()
        out.backward()
        for h in handles:
            h.remove()


body = nn.Sequential(nn.Linear(3, 3), nn.ELU(inplace=True), nn.Linear(3, 1))
Probe(body).run(torch.randn(2, 3))
'''


def test_recursive_helper_reaches_the_leaves():
    assert _found(RECURSIVE.format(register="register_full_backward_hook")) == [24]


def test_recursive_helper_with_forward_hooks_is_silent():
    assert _found(RECURSIVE.format(register="register_forward_hook")) == []


def test_whole_model_hooked_once_is_silent():
    src = RECURSIVE.format(register="register_full_backward_hook").replace(
        "handles = self.attach(self.model)",
        "handles = [self.model.register_full_backward_hook(lambda m, gi, go: None)]")
    assert _found(src) == []


def test_recursive_helper_reaches_a_positional_inplace_flag():
    src = RECURSIVE.format(register="register_full_backward_hook").replace(
        "nn.ELU(inplace=True)", "nn.LeakyReLU(0.2, True)")
    assert _found(src) == [24]


def test_recursive_helper_and_dropout_in_place_is_silent():
    # a dropout writes nothing in eval mode (an explainer's mode); in training it would raise
    # too, but the rule does not read the mode: dropouts are left out
    src = RECURSIVE.format(register="register_full_backward_hook").replace(
        "nn.ELU(inplace=True)", "nn.Dropout(0.1, inplace=True)").replace(
        "Probe(body)", "Probe(body.eval())")
    assert _found(src) == []


# the hooking function is handed to `model.apply`, which calls it on every module
APPLIED = '''
import torch
from torch import nn


def watch(layer):
    if isinstance(layer, nn.Linear):
        layer.register_full_backward_hook(lambda m, gi, go: print(go[0].norm()))


class Keeper:
    def pick(self, layer):
        if isinstance(layer, nn.Linear):
            layer.register_full_backward_hook(self.keep)

    def keep(self, m, gi, go):
        self.last = go[0]


chain = nn.Sequential(nn.Linear(3, 4), {middle}nn.SiLU(inplace=True), nn.Linear(4, 1))
chain.apply({fn})
chain(torch.randn(2, 3)).sum().backward()
'''


def test_apply_of_a_function_reaches_the_layer_after_a_hooked_one():
    assert _found(APPLIED.format(middle="", fn="watch")) == [20]


def test_apply_of_a_method_of_an_instance():
    src = APPLIED.format(middle="", fn="keeper.pick").replace(
        "chain.apply(", "keeper = Keeper()\nchain.apply(")
    assert _found(src) == [20]


def test_apply_and_activation_after_an_unhooked_layer_is_silent():
    assert _found(APPLIED.format(middle="nn.LayerNorm(4), ", fn="watch")) == []


def test_function_never_applied_is_silent():
    src = APPLIED.format(middle="", fn="watch").replace("chain.apply(watch)", "watch(chain)")
    assert _found(src) == []


# forward code writes the output of a hooked layer in place
WRITTEN = '''
import torch
from torch import nn


class Cell(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(4)
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        h = self.norm(self.proj(x))
        {write}
        return h


def hook_all(net, fn):
    for sub in net.modules():
        if {test}:
            sub.register_full_backward_hook(fn)


cell = Cell()
hook_all(cell, lambda m, gi, go: None)
cell(torch.randn(2, 4)).sum().backward()
'''


def test_hooked_output_added_to_in_place():
    assert _found(WRITTEN.format(write="h += x", test="not list(sub.children())")) == [14]


def test_hooked_output_written_by_an_in_place_method():
    assert _found(WRITTEN.format(write="h.mul_(2.0)", test="not list(sub.children())")) == [14]


def test_hooked_output_added_out_of_place_is_silent():
    assert _found(WRITTEN.format(write="h = h + x", test="not list(sub.children())")) == []


def test_unhooked_layer_output_added_in_place_is_silent():
    assert _found(WRITTEN.format(write="h += x", test="isinstance(sub, nn.Linear)")) == []
