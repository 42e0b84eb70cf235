"""Session 48, helper recall48a: backward on data (GT125, NOTE [data values]) and GT702 read in
scripts and past other tensors' flags. Each fact: a buggy twin with codes and lines, silent
look-alikes."""
from __future__ import annotations

import textwrap

from gradtrace.lint import check_source


def _found(src: str, code: str) -> list[int]:
    return sorted(f.line for f in check_source(textwrap.dedent(src)) if f.code == code)


# GT125: a loss written as a weightless module of the file, handed only new tensors
MODULE_LOSS = '''
import torch
import torch.nn.functional as F


class MarginScore(torch.nn.Module):
    def __init__(self, classes, margin=0.5, mode="mean"):
        super().__init__()
        self.classes = classes
        self.margin = margin
        self.mode = mode

    def forward(self, scores, picks):
        hot = F.one_hot(picks, num_classes=self.classes).to(dtype=scores.dtype)
        gap = torch.relu(self.margin - (scores * hot).sum(-1))
        return gap.mean() if self.mode == "mean" else gap.sum()


count = 6
scores = torch.randn(4, count){mark}
picks = torch.randint(0, count, (4,))
total = MarginScore(count, mode="mean")(scores, picks)
{extra}total.backward()
'''


def test_module_loss_on_data_is_reported_at_the_float_input():
    assert _found(MODULE_LOSS.format(mark="", extra=""), "GT125") == [20]


def test_module_loss_on_input_requiring_grad_is_silent():
    src = MODULE_LOSS.format(mark=".requires_grad_()", extra="")
    assert _found(src, "GT125") == []


def test_module_loss_on_input_flagged_later_is_silent():
    src = MODULE_LOSS.format(mark="", extra="scores.requires_grad = True\n")
    assert _found(src, "GT125") == []


def test_module_with_a_layer_is_silent():
    src = MODULE_LOSS.format(mark="", extra="").replace(
        "self.mode = mode", "self.mode = mode\n        self.proj = torch.nn.Linear(6, 6)").replace(
        "(scores * hot)", "(self.proj(scores) * hot)")
    assert _found(src, "GT125") == []


def test_module_running_a_global_model_is_silent():
    src = MODULE_LOSS.format(mark="", extra="").replace(
        "(scores * hot)", "(tower(scores) * hot)").replace(
        "count = 6", "count = 6\ntower = torch.nn.Linear(6, 6)")
    assert _found(src, "GT125") == []


# GT125 in a function: arithmetic and torch ops of new tensors
PLAIN = '''
import torch


def probe(n):
    base = torch.rand(n, 3)
    shift = torch.arange(3)
    level = (base + shift).pow(2).mean()
    {extra}level.backward()
    return base.grad
'''


def test_data_only_value_in_function_is_reported():
    assert _found(PLAIN.format(extra=""), "GT125") == [6]


def test_data_handed_to_a_helper_first_is_silent():
    assert _found(PLAIN.format(extra="prepare(base)\n    "), "GT125") == []


def test_data_written_in_place_with_a_graph_is_silent():
    src = PLAIN.format(extra="").replace("level = (base + shift).pow(2).mean()",
                                          "base[0] = weight.sum()\n    level = base.mean()")
    assert _found(src, "GT125") == []


def test_none_placeholder_is_not_data():
    src = "import torch\nloss = None\nloss.backward()\n"
    assert _found(src, "GT125") == []


def test_backward_under_no_grad_is_left_to_gt207():
    src = ("import torch\nwith torch.no_grad():\n    v = torch.rand(3)\n"
           "    w = (v * 2).sum()\n    w.backward()\n")
    assert _found(src, "GT125") == []


# GT702 in a script, next to another input made with requires_grad=True
SCRIPT_GRAD = '''
import torch

left = torch.tensor([1.0, 2.0]){mark}
right = torch.tensor([3.0, 4.0], requires_grad=True)
{extra}prod = left @ right
pair = torch.autograd.grad(prod, [left, right], allow_unused=True)
'''


def test_script_grad_of_plain_input_is_reported():
    assert _found(SCRIPT_GRAD.format(mark="", extra=""), "GT702") == [4]


def test_script_grad_of_input_requiring_grad_is_silent():
    assert _found(SCRIPT_GRAD.format(mark=".requires_grad_()", extra=""), "GT702") == []


def test_script_grad_of_input_flagged_later_is_silent():
    assert _found(SCRIPT_GRAD.format(mark="", extra="left.requires_grad = True\n"), "GT702") == []


def test_script_grad_of_input_marked_through_a_list_is_silent():
    extra = "for t in [left]:\n    t.requires_grad_()\n"
    assert _found(SCRIPT_GRAD.format(mark="", extra=extra), "GT702") == []


def test_function_grad_of_plain_input_next_to_a_trained_one_is_reported():
    src = '''
    import torch

    def curvature(fn):
        point = torch.zeros(3)
        scale = torch.ones(3, requires_grad=True)
        out = fn(point * scale).sum()
        return torch.autograd.grad(out, [point, scale])
    '''
    assert _found(src, "GT702") == [5]


# NOTE [resize is not training]: a method that trims a submodule's weight and buffers to a
# shorter length (rebinding each to a slice of itself) is surgery, not a freeze or an EMA: the
# cut in forward still starves the trimmed parts
TRIMMED = '''
import torch
import torch.nn as nn


class Reader(nn.Module):
    def __init__(self, width=8, span=16):
        super().__init__()
        self.place = nn.Embedding(span, width)
        self.stages = nn.ModuleList([nn.Linear(width, width) for _ in range(2)])
        self.norm = nn.LayerNorm(width)
        self.out = nn.Linear(width, 4)

    def forward(self, x):
        h = x + self.place.weight[: x.shape[1]]
        for stage in self.stages:
            h = stage(h)
        h = self.norm({cut})
        return self.out(h)

    def shorten(self, span):
{method}

net = Reader()
net.shorten(8)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(2):
    opt.zero_grad()
    net(torch.randn(3, 8, 8)).sum().backward()
    opt.step()
'''
_TRIM = '''        self.place.weight = nn.Parameter(self.place.weight[:span])
        for stage in self.stages:
            if hasattr(stage, "mask"):
                stage.mask = stage.mask[:span, :span]'''


def test_cut_in_forward_of_module_with_a_resize_method_is_reported():
    assert _found(TRIMMED.format(cut="h.detach()", method=_TRIM), "GT115") == [18]


def test_resize_look_alike_live_forward():
    assert _found(TRIMMED.format(cut="h", method=_TRIM), "GT115") == []


def test_resize_look_alike_method_that_freezes_the_stages():
    method = _TRIM + '''
        for p in [*self.place.parameters(), *self.stages.parameters()]:
            p.requires_grad = False'''
    assert _found(TRIMMED.format(cut="h.detach()", method=method), "GT115") == []


def test_resize_look_alike_loop_that_also_copies_weights():
    method = '''        for stage in self.stages:
            stage.weight = nn.Parameter(stage.weight[:span])
            stage.weight.data.mul_(0.5)
        self.place.weight = nn.Parameter(self.place.weight[:span])
        self.place.weight.data.mul_(0.5)'''
    assert _found(TRIMMED.format(cut="h.detach()", method=method), "GT115") == []


def test_script_grad_of_input_flagged_by_a_helper_of_the_file_is_silent():
    src = SCRIPT_GRAD.format(mark="", extra="").replace(
        "left = ", "def enable(ts):\n    for t in ts:\n        t.requires_grad_()\n    return True\n\n\nleft = ").replace(
        "prod = ", "ok = enable(left)\nprod = ")
    assert _found(src, "GT702") == []


def test_script_grad_of_input_run_through_a_model_is_reported():
    src = SCRIPT_GRAD.format(mark="", extra="").replace(
        "prod = left @ right", "net = torch.nn.Linear(2, 2)\nprod = (net(left) @ right)")
    assert _found(src, "GT702") == [4]


def test_data_cut_from_a_trained_tensor_is_left_to_the_cut_rules():
    src = PLAIN.format(extra="").replace("base = torch.rand(n, 3)",
                                          "base = weight.data.clone()\n    weight.sum()")
    assert _found(src, "GT125") == []


ITEMS_REWRAPPED = """
import torch
import torch.nn as nn
import torch.nn.functional as F

model = nn.Linear(4, 1)
x, y = torch.randn(16, 4), torch.randn(16, 1)
parts = [F.mse_loss(model(x[i:i + 4]), y[i:i + 4]).item() for i in range(0, 16, 4)]
loss = torch.tensor(parts).mean()
loss.backward()
"""


def test_data_rebuilt_from_items_of_a_model_output_is_left_to_the_cut():
    """`torch.tensor(parts)` of `.item()` numbers is a cut of the model's graph (GT102 names the
    `.item()`), not data that never had a graph: GT125 stays silent, GT102 stays."""
    assert _found(ITEMS_REWRAPPED, "GT125") == []
    assert _found(ITEMS_REWRAPPED, "GT102") == [8]
    plain = ITEMS_REWRAPPED.replace("F.mse_loss(model(x[i:i + 4]), y[i:i + 4]).item()",
                                    "float(i)")
    assert _found(plain, "GT125") == [10]
