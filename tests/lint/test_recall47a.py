"""Session 47, helper recall47a: GT115 reads further (issue 13 part 3). Each fact: a buggy
twin reported on the cut's line and silent look-alikes."""
from __future__ import annotations

import textwrap

from gradtrace.lint import check_source
from tests.lint.tower_net import tower


def _found(src: str, code: str) -> list[int]:
    return sorted(f.line for f in check_source(textwrap.dedent(src)) if f.code == code)


# NOTE [grouped parameters]: the optimizer is given parameter groups built from the module's
# named parameters a few lines before, in a method of the class
GROUPED = '''
import torch
import torch.nn as nn


class Tower(nn.Module):
    def __init__(self, width=8, depth=2):
        super().__init__()
        self.lookup = nn.Embedding(32, width)
        self.stages = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])
        self.scale = nn.LayerNorm(width)
        self.readout = nn.Linear(width, 32)

    def forward(self, tokens):
        h = self.lookup(tokens)
        for stage in self.stages:
            h = stage(h)
        h = self.scale({cut})
        return self.readout(h)

    def build_optimizer(self, rate):
        by_name = {{k: p for k, p in self.named_parameters()}}
        by_name = {{k: p for k, p in by_name.items() if p.requires_grad}}
        matrices = [p for p in by_name.values() if p.dim() >= 2]
        vectors = [p for p in by_name.values() if p.dim() < 2]
        sets = [{{"params": matrices, "weight_decay": 0.1}}, {{"params": vectors, "weight_decay": 0.0}}]
        return torch.optim.AdamW(sets, lr=rate)
'''


def test_cut_in_forward_of_module_trained_through_parameter_groups():
    assert _found(GROUPED.format(cut="h.detach()"), "GT115") == [18]


def test_grouped_look_alike_straight_through_keeps_a_live_path():
    src = GROUPED.format(cut="h + (torch.round(h) - h).detach()")
    assert _found(src, "GT115") == []


def test_grouped_look_alike_live_forward():
    assert _found(GROUPED.format(cut="h"), "GT115") == []


def test_grouped_look_alike_optimizer_over_another_module():
    src = GROUPED.format(cut="h.detach()").replace(
        "self.named_parameters()", "nn.Linear(4, 4).named_parameters()")
    assert _found(src, "GT115") == []


# NOTE [keyed children]: parts kept in a ModuleDict built in one statement; a cut severs some
# keys while another key (the norm) stays live
KEYED = '''
import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.parts = nn.ModuleDict({built})
        self.head = nn.Linear(width, 4)

    def forward(self, tokens):
        h = self.parts{lookup}(tokens)
        for block in self.parts.blocks:
            h = block(h)
        h = self.parts["norm"]({cut})
        return self.head(h)
{extra}

model = Encoder()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
'''
_DICT_CALL = ("dict(lookup=nn.Embedding(32, width), blocks=nn.ModuleList([nn.Linear(width, "
              "width) for _ in range(2)]), norm=nn.LayerNorm(width))")
_DICT_LIT = ('{"lookup": nn.Embedding(32, width), "blocks": nn.ModuleList([nn.Linear(width, '
             'width)]), "norm": nn.LayerNorm(width)}')


def test_cut_severs_keys_of_a_module_dict_built_with_dict_call():
    src = KEYED.format(built=_DICT_CALL, lookup=".lookup", cut="h.detach()", extra="")
    assert _found(src, "GT115") == [16]


def test_cut_severs_keys_of_a_module_dict_literal_read_by_subscript():
    src = KEYED.format(built=_DICT_LIT, lookup='["lookup"]', cut="h.detach()", extra="")
    assert _found(src, "GT115") == [16]


def test_keyed_look_alike_live_forward():
    src = KEYED.format(built=_DICT_CALL, lookup=".lookup", cut="h", extra="")
    assert _found(src, "GT115") == []


def test_keyed_look_alike_container_frozen_whole_elsewhere():
    extra = '''
    def freeze_trunk(self):
        for p in self.parts.parameters():
            p.requires_grad_(False)
'''
    src = KEYED.format(built=_DICT_CALL, lookup=".lookup", cut="h.detach()", extra=extra)
    assert _found(src, "GT115") == []


def test_keyed_look_alike_cut_keys_updated_elsewhere():
    extra = '''
    @torch.no_grad()
    def follow(self, other, rate=0.99):
        for a, b in zip(self.parts.lookup.parameters(), other.lookup.parameters()):
            a.mul_(rate).add_(b, alpha=1 - rate)
        for a, b in zip(self.parts.blocks.parameters(), other.blocks.parameters()):
            a.mul_(rate).add_(b, alpha=1 - rate)
'''
    src = KEYED.format(built=_DICT_CALL, lookup=".lookup", cut="h.detach()", extra=extra)
    assert _found(src, "GT115") == []


def test_keyed_look_alike_only_weightless_keys_cut():
    src = KEYED.format(
        built="dict(lookup=nn.Dropout(0.1), blocks=nn.ModuleList([nn.ReLU()]), "
              "norm=nn.LayerNorm(width))",
        lookup=".lookup", cut="h.detach()", extra="")
    assert _found(src, "GT115") == []


def test_keyed_look_alike_dict_built_elsewhere():
    src = KEYED.format(built="parts", lookup=".lookup", cut="h.detach()", extra="").replace(
        "def __init__(self, width=8):", "def __init__(self, parts, width=8):").replace(
        "model = Encoder()", "model = Encoder({})")
    assert _found(src, "GT115") == []


# NOTE [model probabilities]: the log reads a model's output whose forward ends in a softmax,
# through a name and a selection of the true classes' entries
PROBS = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 3)

    def forward(self, feats):
        {body}


net = Scorer()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    feats, labels = torch.randn(4, 8), torch.randint(0, 3, (4,))
    {grad}
    p = net(feats)
    chosen = {pick}
    loss = -torch.log({arg}).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
'''
_SOFT = "return F.softmax(self.proj(feats), dim=1)"


def _probs(body=_SOFT, pick="p[torch.arange(4), labels]", arg="chosen", grad=""):
    return PROBS.format(body=body, pick=pick, arg=arg, grad=grad or "pass")


def test_log_of_a_models_softmax_output_picked_by_index():
    assert _found(_probs(), "GT755") == [23]


def test_log_of_a_models_softmax_output_through_gather():
    assert _found(_probs(pick="p.gather(1, labels[:, None])"), "GT755") == [23]


def test_probs_look_alike_epsilon_added():
    assert _found(_probs(arg="chosen + 1e-8"), "GT755") == []


def test_probs_look_alike_forward_returns_logits():
    assert _found(_probs(body="return self.proj(feats)"), "GT755") == []


def test_probs_look_alike_softmax_on_one_branch_only():
    body = ("h = self.proj(feats)\n        if self.training:\n            return h\n"
            "        return h.softmax(dim=1)")
    assert _found(_probs(body=body), "GT755") == []


def test_probs_look_alike_module_without_weights():
    src = _probs().replace("self.proj = nn.Linear(8, 3)", "self.dim = 1").replace(
        "F.softmax(self.proj(feats), dim=1)", "F.softmax(feats[:, :3], dim=self.dim)").replace(
        "net.parameters()", "[torch.zeros(1, requires_grad=True)]")
    assert _found(src, "GT755") == []


def test_probs_look_alike_log_read_only_inside_a_detached_entropy():
    src = _probs(pick="p.gather(1, labels[:, None])", arg="chosen").replace(
        "    loss = -torch.log(chosen).mean()\n",
        "    logp = torch.log(p)\n    bonus = -(p * logp).sum(-1).detach()\n"
        "    loss = -(chosen.squeeze(1) * bonus).mean()\n")
    assert "logp = torch.log(p)" in src
    assert _found(src, "GT755") == []


def test_probs_twin_log_read_live_beside_a_detached_entropy():
    src = _probs(pick="p.gather(1, labels[:, None])", arg="chosen").replace(
        "    loss = -torch.log(chosen).mean()\n",
        "    logp = torch.log(p)\n    bonus = -(p * logp).sum(-1).detach()\n"
        "    loss = -(logp.gather(1, labels[:, None]).squeeze(1) * bonus).mean()\n")
    assert _found(src, "GT755") == [23]


# NOTE [forward cuts]: a copy into a new tensor is a cut too (`torch.Tensor([a, b])` reads each
# one-element score as a number and builds a new leaf)
COPIED = '''
import torch
import torch.nn as nn


class Judge(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(6, 1)
        self.second = nn.Linear(6, 1)
        self.mix = nn.Linear(2, 1)

    def forward(self, a, b):
        sa = self.first(a).squeeze()
        sb = self.second(b).squeeze()
        both = {joined}
        return self.mix(both)


judge = Judge()
opt = torch.optim.SGD(judge.parameters(), lr=0.1)
for _ in range(3):
    out = judge(torch.randn(6), torch.randn(6))
    opt.zero_grad()
    out.sum().backward()
    opt.step()
'''


def test_scores_copied_into_a_new_tensor_in_forward():
    assert _found(COPIED.format(joined="torch.Tensor([sa, sb])"), "GT115") == [16]
    assert _found(COPIED.format(joined="torch.tensor([sa, sb])"), "GT115") == [16]


def test_copied_look_alike_scores_stacked():
    assert _found(COPIED.format(joined="torch.stack([sa, sb])"), "GT115") == []


def test_copied_look_alike_as_tensor_of_one_tensor():
    src = COPIED.format(joined="torch.as_tensor(torch.stack([sa, sb]))")
    assert _found(src, "GT115") == []


_LOOK = ("before = [p.detach().clone() for p in judge.first.parameters()]\n"
         "count = sum(p.numel() for p in judge.second.parameters())\n"
         "moved = max((p.detach() - b).abs().max() for p, b in zip(judge.first.parameters(), before))\n")


def test_copied_twin_beside_snapshots_and_counts_of_the_parameters():
    src = COPIED.format(joined="torch.Tensor([sa, sb])") + _LOOK
    assert _found(src, "GT115") == [16]


def test_copied_look_alike_first_frozen_in_a_comprehension():
    src = COPIED.format(joined="torch.Tensor([sa, sb])") + _LOOK + (
        "flags = [p.requires_grad_(False) for p in judge.first.parameters()]\n"
        "flags = [p.requires_grad_(False) for p in judge.second.parameters()]\n")
    assert _found(src, "GT115") == []


def test_copied_look_alike_first_copied_from_a_teacher():
    src = COPIED.format(joined="torch.Tensor([sa, sb])") + _LOOK + (
        "teacher = Judge()\n"
        "done = [q.data.copy_(p) for p, q in zip(teacher.first.parameters(), judge.first.parameters())]\n"
        "done = [q.data.copy_(p) for p, q in zip(teacher.second.parameters(), judge.second.parameters())]\n")
    assert _found(src, "GT115") == []


# NOTE [trained abroad]: the model file (tests/lint/tower_net.py) builds no optimizer; a training
# script of the project builds the model, an optimizer over it and runs a backward
TRAIN = '''
import torch
from towers import Tower

{built}
opt = torch.optim.Adam({over}.parameters(), lr=1e-3)
for _ in range(3):
    x, y = torch.randn(5, 4), torch.randn(5, 2)
    out = {run}(x)
    loss = ((out - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
{extra}
'''


def _project(tmp_path, cut="h.detach()", built="model = Tower().to('cpu')", over="model",
             run="model", extra="", train=True):
    import os
    from gradtrace.lint import check_paths
    (tmp_path / "towers.py").write_text(tower(cut))
    if train:
        (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN.format(
            built=built, over=over, run=run, extra=extra)))
    (tmp_path / "notes.py").write_text("print('other file')\n")
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        found = check_paths(["towers.py"]).findings
    finally:
        os.chdir(here)
    return sorted(f.line for f in found if f.code == "GT115")


def test_model_file_cut_trained_by_a_script_of_the_project(tmp_path):
    assert _project(tmp_path) == [15]


def test_abroad_look_alike_live_forward(tmp_path):
    assert _project(tmp_path, cut="h") == []


def test_abroad_look_alike_no_training_file(tmp_path):
    assert _project(tmp_path, train=False) == []


def test_abroad_look_alike_built_as_a_teacher_the_optimizer_does_not_hold(tmp_path):
    built = "teacher = Tower()\nteacher.eval()\nmodel = torch.nn.Linear(4, 2)"
    assert _project(tmp_path, built=built, run="teacher(x) * 0 + model") == []


def test_abroad_look_alike_cut_part_frozen_by_the_script(tmp_path):
    extra = "model.lookup.requires_grad_(False)\nmodel.stage.requires_grad_(False)"
    assert _project(tmp_path, extra=extra) == []


# `self.<name>` in a method of another class of the file is that class's attribute
OTHER = '''
import torch
import torch.nn as nn


class Side(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(6, 1)

    def forward(self, a):
        return self.first(a)
{sub}
''' + COPIED.split("import torch.nn as nn\n", 1)[1]


def test_copied_twin_beside_another_class_with_the_same_attribute():
    src = OTHER.format(sub="", joined="torch.Tensor([sa, sb])")
    assert "class Side" in src and "class Judge" in src
    assert _found(src, "GT115") == [26]


def test_copied_look_alike_same_attribute_in_a_subclass_that_runs_it():
    sub = '''

class Twice(Judge):
    def second_look(self, a):
        return self.first(a) + self.second(a)
'''
    src = OTHER.format(sub=sub, joined="torch.Tensor([sa, sb])")
    assert _found(src, "GT115") == []
