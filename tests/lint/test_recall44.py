"""Session 44, helper recall44: GT401 facts found missing by injected bugs (layers kept in a
plain list) in real model code (benchmarks/mutation_recall.py, tuning set). Each fact: a buggy
twin reported on its line and a silent look-alike, in words other than the corpora's."""
from __future__ import annotations

import textwrap
from pathlib import Path

from gradtrace.lint import check_paths, check_source
from gradtrace.lint.config import Settings


def _found(src: str, code: str = "GT401") -> list[int]:
    return sorted(f.line for f in check_source(textwrap.dedent(src)) if f.code == code)


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def _project(root: Path, code: str = "GT401") -> list[tuple[str, int]]:
    got = check_paths([str(root)], Settings()).findings
    return sorted((Path(f.path).name, f.line) for f in got if f.code == code)


# NOTE [layer class of another file]: the element's class is defined in another file of the
# project; its name says nothing (`Stage`, `Pooler`), its own file says whether it has weights
BLOCKS = '''
import torch
import torch.nn as nn


class Stage(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.mix = nn.Conv2d(cin, cout, 3, padding=1)

    def forward(self, x):
        return self.mix(x)


class Pooler(nn.Module):
    def forward(self, x):
        return nn.functional.max_pool2d(x, 2)


class Bank(nn.Module):
    def __init__(self, taps):
        super().__init__()
        self.register_buffer("kernel", torch.ones(1, 1, taps) / taps)

    def forward(self, x):
        return nn.functional.conv1d(x, self.kernel)


class Drop(nn.Module):
    def __init__(self, p, owner):
        super().__init__()
        self.p = p
        self.owner = owner

    def forward(self, x):
        return nn.functional.dropout(x, self.p, self.training)
'''

TOWER = '''
import torch.nn as nn

from blocks import {CLS}


class Tower(nn.Module):
    def __init__(self, widths):
        super().__init__()
        self.parts = [{CLS}({ARGS}) for w in widths]

    def forward(self, x):
        for p in self.parts:
            x = p(x)
        return x
'''


def test_layer_class_of_another_file_twin(tmp_path):
    root = _write(tmp_path, {"blocks.py": BLOCKS,
                             "tower.py": TOWER.format(CLS="Stage", ARGS="w, w")})
    assert _project(root) == [("tower.py", 9)]


def test_layer_class_of_another_file_lookalike_registered(tmp_path):
    tower = TOWER.format(CLS="Stage", ARGS="w, w").replace(
        "self.parts = [Stage(w, w) for w in widths]",
        "self.parts = nn.ModuleList([Stage(w, w) for w in widths])")
    root = _write(tmp_path, {"blocks.py": BLOCKS, "tower.py": tower})
    assert _project(root) == []


def test_weightless_class_of_another_file_lookalike(tmp_path):
    root = _write(tmp_path, {"blocks.py": BLOCKS,
                             "tower.py": TOWER.format(CLS="Pooler", ARGS="")})
    assert _project(root) == []


def test_buffer_only_class_of_another_file_lookalike(tmp_path):
    # a filter bank of buffers and a dropout wrapper storing its rate and its owner's name
    # create no parameter: nothing the optimizer misses
    for cls, args in (("Bank", "w"), ("Drop", "0.1, 'tower'")):
        root = _write(tmp_path / cls, {"blocks.py": BLOCKS,
                                       "tower.py": TOWER.format(CLS=cls, ARGS=args)})
        assert _project(root) == []


def test_layer_class_of_another_file_in_a_sequential_twin(tmp_path):
    tower = TOWER.format(CLS="Stage", ARGS="w, w").replace(
        "[Stage(w, w) for w in widths]", "[nn.Sequential(nn.ReLU(), Stage(w, w)) for w in widths]")
    root = _write(tmp_path, {"blocks.py": BLOCKS, "tower.py": tower})
    assert _project(root) == [("tower.py", 9)]


def test_weightless_class_of_another_file_in_a_sequential_lookalike(tmp_path):
    tower = TOWER.format(CLS="Pooler", ARGS="").replace(
        "[Pooler() for w in widths]", "[nn.Sequential(nn.ReLU(), Pooler()) for w in widths]")
    root = _write(tmp_path, {"blocks.py": BLOCKS, "tower.py": tower})
    assert _project(root) == []


# a local list filled in a loop with a local bound to a layer, then stored as `list(...)`
LOCAL = '''
import torch.nn as nn


class Stack(nn.Module):
    def __init__(self, n, d):
        super().__init__()
        steps = []
        for _ in range(n):
            step = nn.Sequential(nn.Conv1d(d, d, 3), nn.BatchNorm1d(d))
            steps.append(step)
        self.steps = {WRAP}(steps)

    def forward(self, x):
        for s in self.steps:
            x = s(x)
        return x
'''


def test_appended_local_stored_as_a_list_twin():
    assert _found(LOCAL.replace("{WRAP}", "list")) == [12]


def test_appended_local_registered_lookalike():
    assert _found(LOCAL.replace("{WRAP}", "nn.ModuleList")) == []


def test_appended_local_without_weights_lookalike():
    src = LOCAL.replace("{WRAP}", "list").replace(
        "nn.Sequential(nn.Conv1d(d, d, 3), nn.BatchNorm1d(d))", "nn.Sequential(nn.ReLU(), nn.Dropout())")
    assert _found(src) == []


# a list that starts with a layer without weights and is appended weighted layers later
SEEDED = '''
import torch.nn as nn


class Chain(nn.Module):
    def __init__(self, d, n):
        super().__init__()
        self.ops = {OPEN}[nn.ReLU()]{CLOSE}
        for _ in range(n):
            self.ops.append(nn.Sequential(nn.Conv2d(d, d, 3, padding=1), nn.MaxPool2d(3, 1, 1)))

    def forward(self, x):
        for op in self.ops:
            x = op(x)
        return x
'''


def test_seeded_list_appended_layers_twin():
    assert _found(SEEDED.replace("{OPEN}", "").replace("{CLOSE}", "")) == [8]


def test_seeded_module_list_appended_layers_lookalike():
    assert _found(SEEDED.replace("{OPEN}", "nn.ModuleList(").replace("{CLOSE}", ")")) == []


def test_seeded_list_appended_pools_lookalike():
    src = SEEDED.replace("{OPEN}", "").replace("{CLOSE}", "").replace(
        "nn.Sequential(nn.Conv2d(d, d, 3, padding=1), nn.MaxPool2d(3, 1, 1))", "nn.MaxPool2d(3, 1, 1)")
    assert _found(src) == []


# NOTE [copied layers]: N deep copies of a layer the constructor is handed, its class given by
# the parameter's annotation
COPIED = '''
import copy

import torch.nn as nn


class Cell(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        return self.proj(x).tanh()


class Gate(nn.Module):
    def forward(self, x):
        return x.sigmoid() * x


class Repeat(nn.Module):
    def __init__(self, unit: {CLS}, times: int):
        super().__init__()
        self.units = {OPEN}[copy.deepcopy(unit) for _ in range(times)]{CLOSE}

    def forward(self, x):
        for u in self.units:
            x = u(x)
        return x
'''


def test_deep_copies_of_an_annotated_layer_twin():
    src = COPIED.replace("{CLS}", "Cell").replace("{OPEN}", "").replace("{CLOSE}", "")
    assert _found(src) == [24]


def test_deep_copies_registered_lookalike():
    src = COPIED.replace("{CLS}", "Cell").replace("{OPEN}", "nn.ModuleList(").replace(
        "{CLOSE}", ")")
    assert _found(src) == []


def test_deep_copies_of_a_weightless_layer_lookalike():
    src = COPIED.replace("{CLS}", "Gate").replace("{OPEN}", "").replace("{CLOSE}", "")
    assert _found(src) == []


# NOTE [weightless class of the file]: the loss is a module class of the file that holds only a
# torch loss (and a weight tensor it is handed), chosen in two arms; `.detach()` on the model's
# output leaves it without graph
MASKED = '''
import torch
import torch.nn as nn


class Ranked(nn.Module):
    def __init__(self, weight=None):
        super().__init__()
        self.base = nn.NLLLoss(weight=weight)

    def forward(self, scores, y, keep):
        per = self.base(torch.log_softmax(scores, dim=1), y)
        return (keep * per).sum() / keep.sum()


class Flat(nn.Module):
    def __init__(self, weight=None):
        super().__init__()
        self.base = nn.NLLLoss(weight=weight){EXTRA}

    def forward(self, scores, y, keep=None):
        return self.base(torch.log_softmax({INNER}, dim=1), y)


def fit(net, batches, ranked, w):
    if ranked:
        judge = Ranked(weight=w)
    else:
        judge = Flat(weight=w)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for x, y, keep in batches:
        scores = net(x)
        opt.zero_grad()
        err = judge({ARG}, y, keep)
        err.backward()
        opt.step()
'''


def _masked(extra: str = "", inner: str = "scores", arg: str = "scores") -> str:
    return MASKED.replace("{EXTRA}", extra).replace("{INNER}", inner).replace("{ARG}", arg)


def test_weightless_loss_class_of_the_file_twin():
    assert _found(_masked(arg="scores.detach()"), "GT107") == [34]


def test_weightless_loss_class_of_the_file_lookalike():
    assert _found(_masked(), "GT107") == []


def test_loss_class_with_weights_lookalike():
    # one arm holds a layer with weights: the loss may train it from the detached scores
    src = _masked(extra="\n        self.scale = nn.Linear(4, 4)", inner="self.scale(scores)",
                  arg="scores.detach()")
    assert _found(src, "GT107") == []


# NOTE [methods of held objects]: the optimizer and its scheduler come back from a method of a
# plain class of the file; stepping before the backward is then seen as for an optimizer built
# in place
HELD = '''
import torch
import torch.nn as nn
from torch.optim.lr_scheduler import CosineAnnealingLR


class Setup:
    def __init__(self, lr):
        self.lr = lr

    def make(self, model):
        opt = torch.optim.AdamW(model.parameters(), lr=self.lr)
        sched = CosineAnnealingLR(opt, T_max=10)
        return opt, sched


def main(net, critic, loader):
    setup = Setup(1e-3)
    opt, sched = setup.make({WHO})
    crit = nn.CrossEntropyLoss()
    for x, y in loader:
        opt.zero_grad()
        out = net(x)
        loss = crit(out, y)
        {ORDER}
        sched.step()
'''

_EARLY = "opt.step()\n        loss.backward()"
_LATE = "loss.backward()\n        opt.step()"


def test_optimizer_from_a_held_objects_method_stepped_early_twin():
    src = HELD.replace("{WHO}", "net").replace("{ORDER}", _EARLY)
    assert _found(src, "GT609") == [25]
    assert _found(src, "GT522") == [25]


def test_optimizer_from_a_held_objects_method_lookalike():
    assert _found(HELD.replace("{WHO}", "net").replace("{ORDER}", _LATE), "GT609") == []


def test_optimizer_of_another_model_from_a_held_objects_method_lookalike():
    # the method's `model` is the caller's `critic`, which the loss never reaches
    src = HELD.replace("{WHO}", "critic").replace("{ORDER}", _EARLY)
    assert _found(src, "GT609") == []


# NOTE [owners from the kinds]: the optimizers are handed in by the script's main block; the
# critic's clear is hoisted out of the loop while the generator's stays inside it
GAN = '''
import torch
from torch import nn, optim


def fit(batches, gen, critic, gen_opt, critic_opt):
    {HOIST}
    for real in batches:
        fake = gen(torch.randn(4, 8))
        c_loss = critic(fake.detach()).mean() - critic(real).mean()
        {INNER}
        c_loss.backward()
        critic_opt.step()
        g_loss = -critic(fake).mean()
        gen.zero_grad()
        g_loss.backward()
        gen_opt.step()


if __name__ == "__main__":
    gen = nn.Linear(8, 8)
    critic = nn.Linear(8, 1)
    gen_opt = optim.Adam(gen.parameters(), lr=1e-3)
    critic_opt = optim.Adam({OWNER}.parameters(), lr=1e-3)
    fit([torch.randn(4, 8)], gen, critic, gen_opt, critic_opt)
'''


def _gan(hoist: str, inner: str, owner: str = "critic") -> str:
    return GAN.replace("{HOIST}", hoist).replace("{INNER}", inner).replace("{OWNER}", owner)


def test_critic_clear_hoisted_out_of_the_loop_twin():
    assert _found(_gan("critic.zero_grad()", "pass"), "GT502") == [7]


def test_critic_clear_inside_the_loop_lookalike():
    assert _found(_gan("pass", "critic.zero_grad()"), "GT502") == []


def test_clear_inside_the_loop_of_the_model_the_optimizer_holds_lookalike():
    # the hoisted clear is the critic's, but the stepped optimizer holds the generator, whose
    # clear runs on every pass
    assert _found(_gan("critic.zero_grad()", "pass", owner="gen"), "GT502") == []
