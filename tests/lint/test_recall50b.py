"""Session 50, helper recall50b: static facts that generalise (issue 13 part 3). Each fact: a
buggy twin reported on the cause's line and silent look-alikes, in words of no corpus."""
from __future__ import annotations

import os
import textwrap

from gradtrace.lint import check_paths, check_source


def _found(src: str, code: str = "GT408") -> list[int]:
    return sorted(f.line for f in check_source(textwrap.dedent(src)) if f.code == code)


# NOTE [new part frozen]: a pretrained trunk gets a new scoring layer, which is then frozen
# itself (not by a freeze-everything loop), and the optimizer is built over the whole net
SCRIPT = '''
import torch
from torch import nn
import torchvision
trunk = torchvision.models.resnet34(weights="DEFAULT")
trunk.fc = {built}
{between}
{freeze}
{after}
sgd = torch.optim.SGD({over}.parameters(), lr=0.05)
for a, b in pairs:
    sgd.zero_grad()
    nn.functional.cross_entropy(trunk(a), b).backward()
    sgd.step()
'''


def _script(built="nn.Linear(512, 7)", freeze="trunk.fc.requires_grad_(False)",
            between="", after="", over="trunk") -> list[int]:
    return _found(SCRIPT.format(built=built, freeze=freeze, between=between, after=after,
                                over=over))


def test_new_layer_frozen_itself():
    assert _script() == [8]


def test_new_layer_frozen_by_a_loop_over_its_parameters():
    loop = "for w in trunk.fc.parameters():\n    w.requires_grad = False"
    assert _script(freeze=loop, built="nn.Sequential(nn.Dropout(0.1), nn.Linear(512, 7))") \
        == [8]  # the loop's line, as GT408's freeze-everything loops


def test_new_layer_frozen_optimizer_over_the_layer_alone():
    assert _script(over="trunk.fc") == [8]


def test_look_alike_part_without_parameters():
    assert _script(built="nn.Identity()") == []


def test_look_alike_another_part_frozen():
    assert _script(freeze="trunk.layer1.requires_grad_(False)") == []


def test_look_alike_layer_given_values_by_hand():
    assert _script(between="nn.init.eye_(trunk.fc.weight)") == []
    assert _script(after="trunk.fc.weight.data.copy_(table)") == []


def test_look_alike_layer_loaded_after_the_freeze():
    assert _script(after="trunk.fc.load_state_dict(torch.load('fc.pt'))") == []
    assert _script(after="trunk.load_state_dict(torch.load('all.pt'))") == []


def test_resume_under_a_condition_still_reported():
    assert _script(after="if resume:\n    trunk.load_state_dict(torch.load(resume))") == [8]


def test_look_alike_unfrozen_later():
    assert _script(after="trunk.fc.requires_grad_(True)") == []


def test_look_alike_no_optimizer_over_it():
    assert _script(over="trunk.layer4") == []


def test_look_alike_freeze_staged_in_a_loop():
    staged = "for stage in range(2):\n    trunk.fc.requires_grad_(stage == 1)"
    assert _script(freeze=staged) == []


# the random target network of a module (distillation of random features) is frozen by
# design: an attribute of `self`, built by the module itself
TARGET = '''
import torch
from torch import nn
class Curiosity(nn.Module):
    def __init__(self):
        super().__init__()
        self.target = nn.Linear(16, 8)
        self.target.requires_grad_(False)
        self.guess = nn.Linear(16, 8)
agent = Curiosity()
opt = torch.optim.Adam(agent.parameters())
'''


def test_look_alike_random_target_of_a_module():
    assert _found(TARGET) == []


# the layer is put on the model by a factory function of the file, frozen by the caller
FACTORY = '''
import torch
from torch import nn
import torchvision
def make(classes, small):
    if small:
        net = torchvision.models.resnet18(weights="DEFAULT")
        net.fc = nn.Linear(512, classes)
    else:
        net = Plain()
    return net
def main():
    net = make(7, True).to("cpu")
    net.fc.requires_grad_(False)
    opt = torch.optim.Adam(net.parameters())
    {extra}
'''


def test_factory_of_the_file_builds_the_frozen_layer():
    assert _found(FACTORY.format(extra="")) == [14]


def test_factory_look_alike_the_caller_loads_weights():
    assert _found(FACTORY.format(extra="net.load_state_dict(torch.load('best.pt'))")) == []


def test_factory_look_alike_the_factory_fills_the_layer():
    src = FACTORY.replace("net.fc = nn.Linear(512, classes)",
                          "net.fc = nn.Linear(512, classes)\n        net.fc.weight.data.zero_()")
    assert _found(src.format(extra="")) == []


# the same across two files of a project (the caller imports the factory)
MODELS = '''
import torch.nn as nn
import torchvision
def build(classes=5):
    body = torchvision.models.resnet50(weights="DEFAULT")
    body.fc = nn.Linear(2048, classes)
    return body
'''

TRAIN = '''
import torch
from models import build
def run(pairs):
    body = build()
    {freeze}
    opt = torch.optim.SGD(body.parameters(), lr=0.01)
    for a, b in pairs:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(body(a), b).backward()
        opt.step()
'''


def _project(tmp_path, freeze: str) -> list[tuple[str, int]]:
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "train.py").write_text(TRAIN.format(freeze=freeze))
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        found = check_paths(["train.py"]).findings
    finally:
        os.chdir(here)
    return [(f.path, f.line) for f in found if f.code == "GT408"]


def test_project_factory_builds_the_frozen_layer(tmp_path):
    assert _project(tmp_path, "body.fc.requires_grad_(False)") == [("train.py", 6)]


def test_project_look_alike_trunk_frozen(tmp_path):
    assert _project(tmp_path, "body.layer1.requires_grad_(False)") == []


# NOTE [captured targets]: a probe inserted in a network stores its input in one mode and
# compares against it in another; the capture runs once, the loss steps many times
PROBE = '''
import torch
from torch import nn
import torch.nn.functional as F


class Probe(nn.Module):
    def __init__(self):
        super().__init__()
        self.phase, self.crit, self.keep = "idle", nn.L1Loss(), []

    def forward(self, feats):
        pooled = feats.mean(dim=(2, 3))
        if self.phase == "record":
            {store}
        elif self.phase == "score":
            self.loss = {loss}
        return feats


net = nn.Sequential(nn.Conv2d(3, 4, 3), Probe())
probe = net[1]
probe.phase = "record"
{capture}
probe.phase = "score"
picture = torch.rand(1, 3, 9, 9).requires_grad_(True)
opt = torch.optim.Adam([picture])
for _ in range(4):
    opt.zero_grad()
    net(picture)
    probe.loss.backward()
    opt.step()
'''


def _probe(store="self.aim = pooled", loss="self.crit(pooled, self.aim)",
           capture="net(torch.rand(1, 3, 9, 9))", code="GT528") -> list[int]:
    return _found(PROBE.format(store=store, loss=loss, capture=capture), code)


def test_captured_target_kept_with_graph():
    assert _probe() == [15]


def test_captured_target_appended_functional_loss():
    assert _probe(store="self.keep.append(pooled * 2.0)",
                  loss="F.mse_loss(pooled, self.keep[0])") == [15]


def test_captured_look_alike_detached():
    assert _probe(store="self.aim = pooled.detach()") == []
    assert _probe(store="self.keep.append(pooled.detach() * 2.0)",
                  loss="F.mse_loss(pooled, self.keep[0])") == []


def test_captured_look_alike_shape_only():
    assert _probe(store="self.aim = torch.zeros(pooled.shape)") == []


def test_captured_look_alike_capture_under_no_grad_in_the_module():
    store = "with torch.no_grad():\n                self.aim = pooled"
    assert _probe(store=store) == []


def test_captured_look_alike_not_a_loss():
    assert _probe(loss="pooled.sum() + 0 * len(self.aim)") == []


def test_captured_look_alike_store_and_compare_in_one_call():
    src = PROBE.format(store="self.aim = pooled", loss="self.crit(pooled, self.aim)",
                       capture="net(torch.rand(1, 3, 9, 9))")
    src = src.replace('        elif self.phase == "score":\n',
                      '        if self.phase != "idle":\n')
    assert _found(src, "GT528") == []


def test_new_item_of_a_sequence_frozen():
    src = SCRIPT.replace("trunk.fc = {built}", "trunk.head[2] = {built}")
    assert _found(src.format(built="nn.Linear(512, 7)", between="",
                             freeze="trunk.head[2].requires_grad_(False)", after="",
                             over="trunk")) == [8]


def test_new_item_look_alike_given_values():
    src = SCRIPT.replace("trunk.fc = {built}", "trunk.head[2] = {built}")
    assert _found(src.format(built="nn.Linear(512, 7)", between="",
                             freeze="trunk.head[2].requires_grad_(False)",
                             after="trunk.head[2].weight.data.copy_(table)",
                             over="trunk")) == []


# a module class replaces its trunk's head and freezes it; the script trains an instance
WRAPPED = '''
import torch
from torch import nn
import torchvision


class Scorer(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.trunk = torchvision.models.resnet18(weights="DEFAULT")
        self.trunk.fc = nn.Linear(512, classes)
        for w in self.trunk.fc.parameters():
            w.requires_grad = False

    def forward(self, x):
        return self.trunk(x)


scorer = Scorer(4)
opt = torch.optim.Adam({over}.parameters())
'''


def test_new_part_frozen_in_a_module_class_trained_by_the_script():
    assert _found(WRAPPED.format(over="scorer")) == [12]


def test_new_part_frozen_in_a_module_class_look_alike_class_not_trained():
    assert _found(WRAPPED.format(over="other")) == []


def test_captured_target_on_the_first_call():
    src = PROBE.format(store="self.aim = pooled", loss="self.crit(pooled, self.aim)",
                       capture="net(torch.rand(1, 3, 9, 9))")
    src = src.replace('if self.phase == "record":', "if self.aim is None:").replace(
        'elif self.phase == "score":', "else:").replace(
        'self.phase, self.crit, self.keep = "idle", nn.L1Loss(), []',
        'self.aim, self.crit, self.keep = None, nn.L1Loss(), []')
    assert _found(src, "GT528") == [15]


def test_look_alike_layer_built_again_after_the_freeze():
    assert _script(after="trunk.fc = nn.Linear(512, 7)") == []
