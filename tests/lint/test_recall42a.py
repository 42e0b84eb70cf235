"""The facts of docs/triage/recall42a.md (session 42): a module built by a class or a factory
of another file of the project is known as a module in class methods too (a trainer's
``self.x = make_x(...)``, a module class's ``__init__``: NOTE [foreign module kinds]), and
GT438 follows a module stored on ``self`` and trained in another method (NOTE [module kept on
self]). Each pair is a correct project the checker must leave alone and a buggy twin it must
report on its line, in other names and shapes than the real-world cases; every project runs
on real torch."""
from __future__ import annotations

import runpy
import sys

import pytest

torch = pytest.importorskip("torch")

# a project's library file: a module class, a plain class, and factories of both
BLOCKS = '''
from torch import nn


class Mixer(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.lin = nn.Linear(4, width)

    def forward(self, x):
        return self.lin(x).tanh()


class Settings:
    def __init__(self):
        self.requires_grad = True
        self.rate = 0.5


def make_mixer(width=4):
    mixer = Mixer(width)
    return mixer


def make_settings():
    return Settings()


class Grouped:
    def begin(self):
        self.opt.add_param_group({"params": list(self.core.parameters())})
'''

# GT407 in a plain class's method: `self.<x>.requires_grad = False` on what a factory of
# another file built in `__init__` (a module: freezes nothing). Look-alike: the same flag set
# on a plain object of the project, which holds it
WORKER = '''
import torch

from blocks import make_mixer, make_settings


class Worker:
    def __init__(self):
        self.held = {factory}()

    def prepare(self):
        self.held.requires_grad = False
        return self


w = Worker().prepare()
FROZEN = {frozen}
'''

# GT407 through a module class's `__init__` (`self.<x> = make_mixer()`), the flag set on the
# attribute chain in the script. Look-alike: a plain object stored the same way
CHAIN = '''
import torch

import blocks


class Pipeline(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stage = blocks.make_mixer(4)
        self.opts = blocks.make_settings()

    def forward(self, x):
        return self.stage(x)


pipe = Pipeline()
pipe.{attr}.requires_grad = False
FROZEN = {frozen}
'''


def _project(root, main: str):  # type: ignore[no-untyped-def]
    (root / "blocks.py").write_text(BLOCKS.lstrip("\n"))
    (root / "main.py").write_text(main.lstrip("\n"))
    return root / "main.py"


def _lines(path, code: str) -> list[int]:  # type: ignore[no-untyped-def]
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    return [f.line for f in check_paths([str(path.parent)], Settings()).findings
            if f.code == code]


def _run(path, monkeypatch) -> dict:  # type: ignore[no-untyped-def]
    monkeypatch.syspath_prepend(str(path.parent))
    try:
        return runpy.run_path(str(path))
    finally:  # the project's `blocks` must not stay imported for the next test
        sys.modules.pop("blocks", None)


def test_flag_on_a_plain_object_kept_by_a_worker_is_silent(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path = _project(tmp_path, WORKER.format(factory="make_settings",
                                            frozen="w.held.requires_grad is False"))
    assert _lines(path, "GT407") == []
    assert _run(path, monkeypatch)["FROZEN"]


def test_flag_on_a_module_kept_by_a_worker_is_reported(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path = _project(tmp_path, WORKER.format(
        factory="make_mixer", frozen="not any(p.requires_grad for p in w.held.parameters())"))
    assert _lines(path, "GT407") == [11]
    assert not _run(path, monkeypatch)["FROZEN"]  # nothing was frozen


def test_flag_on_a_plain_part_of_a_module_class_is_silent(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path = _project(tmp_path, CHAIN.format(attr="opts", frozen="pipe.opts.requires_grad is False"))
    assert _lines(path, "GT407") == []
    assert _run(path, monkeypatch)["FROZEN"]


def test_flag_on_a_factory_part_of_a_module_class_is_reported(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path = _project(tmp_path, CHAIN.format(
        attr="stage", frozen="not any(p.requires_grad for p in pipe.stage.parameters())"))
    assert _lines(path, "GT407") == [17]
    assert not _run(path, monkeypatch)["FROZEN"]


# GT438 through a class: the module kept on `self` in `__init__` (a factory or a class of
# another file of the project) runs in the method's backward-and-step loop, the class's
# optimizer holds the top layer only: the core never changes. Look-alikes: the optimizer
# holds both; the core is a fixed feature extractor run under `no_grad`
FITTER = '''
import torch
import torch.nn.functional as F
from torch import nn

import blocks


class Fitter{base}:
    def __init__(self):
        self.core = {build}
        self.top = nn.Linear(4, 1)
        self.opt = torch.optim.SGD({params}, lr=0.1)

    def run(self, steps):
        {prep}
        for _ in range(steps):
            x, y = torch.randn(6, 4), torch.randn(6, 1)
            {feats}
            loss = F.mse_loss(self.top(feats), y)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()


f = Fitter()
before = [p.detach().clone() for p in f.core.parameters()]
f.run(3)
MOVED = not all(torch.equal(a, b) for a, b in zip(before, f.core.parameters()))
'''

# the per-batch step as a method (no loop of its own), the loop in the script
STEPPER = '''
import torch
import torch.nn.functional as F
from torch import nn

from blocks import Mixer


class Solver:
    def __init__(self):
        self.encode = Mixer(4)
        self.score = nn.Linear(4, 1)
        self.optim = torch.optim.Adam({params}, lr=0.01)

    def update(self, x, y):
        loss = F.mse_loss(self.score(self.encode(x)), y)
        self.optim.zero_grad()
        loss.backward()
        self.optim.step()
        return loss.item()


s = Solver()
before = [p.detach().clone() for p in s.encode.parameters()]
for _ in range(3):
    s.update(torch.randn(5, 4), torch.randn(5, 1))
MOVED = not all(torch.equal(a, b) for a, b in zip(before, s.encode.parameters()))
'''

OWN = "[*self.core.parameters(), *self.top.parameters()]"


@pytest.mark.parametrize("base,build,params,prep,feats,moved", [
    ("", "blocks.make_mixer(4)", OWN, "", "feats = self.core(x)", True),
    ("", "blocks.Mixer(4)", "self.top.parameters()", "",
     "with torch.no_grad():\n                feats = self.core(x)", False),
    # a base class of another file adds the core to the optimizer: code not read here
    ("(blocks.Grouped)", "blocks.make_mixer(4)", "self.top.parameters()", "self.begin()",
     "feats = self.core(x)", True),
])
def test_module_kept_on_self_trained_or_fixed_on_purpose_is_silent(
        tmp_path, monkeypatch, base: str, build: str, params: str, prep: str, feats: str,
        moved: bool) -> None:  # type: ignore[no-untyped-def]
    path = _project(tmp_path, FITTER.format(base=base, build=build, params=params, prep=prep,
                                            feats=feats))
    assert _lines(path, "GT438") == []
    assert _run(path, monkeypatch)["MOVED"] is moved


@pytest.mark.parametrize("build", ["blocks.make_mixer(4)", "blocks.Mixer(4)", "nn.Linear(4, 4)"])
def test_module_kept_on_self_left_out_of_the_optimizer_is_reported(
        tmp_path, monkeypatch, build: str) -> None:  # type: ignore[no-untyped-def]
    path = _project(tmp_path, FITTER.format(base="", build=build, prep="pass",
                                            params="self.top.parameters()",
                                            feats="feats = self.core(x)"))
    assert _lines(path, "GT438") == [12]
    assert not _run(path, monkeypatch)["MOVED"]


def test_step_method_over_both_modules_is_silent(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path = _project(tmp_path, STEPPER.format(
        params="list(self.encode.parameters()) + list(self.score.parameters())"))
    assert _lines(path, "GT438") == []
    assert _run(path, monkeypatch)["MOVED"]


def test_step_method_over_the_score_layer_only_is_reported(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path = _project(tmp_path, STEPPER.format(params="self.score.parameters()"))
    assert _lines(path, "GT438") == [12]
    assert not _run(path, monkeypatch)["MOVED"]


# GT438 through a constructor: the script builds the core, the top layer and an optimizer,
# hands the three to a loop class that keeps them on `self` and trains in a method. Twin:
# the optimizer holds the top layer only (reported at the optimizer). Look-alikes: it holds
# both; the script freezes the core before handing it over
LOOP = '''
import torch
import torch.nn.functional as F
from torch import nn

from blocks import make_mixer


class Loop:
    def __init__(self, core, top, opt):
        self.core = core
        self.top = top
        self.opt = opt

    def go(self, steps):
        for _ in range(steps):
            x, y = torch.randn(6, 4), torch.randn(6, 1)
            loss = F.mse_loss(self.top(self.core(x)), y)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()


core = make_mixer(4)
top = nn.Linear(4, 1)
{freeze}
opt = torch.optim.SGD({params}, lr=0.1)
before = [p.detach().clone() for p in core.parameters()]
Loop(core, top, opt).go(3)
MOVED = not all(torch.equal(a, b) for a, b in zip(before, core.parameters()))
'''


@pytest.mark.parametrize("freeze,params,moved", [
    ("", "[*core.parameters(), *top.parameters()]", True),
    ("core.requires_grad_(False)", "top.parameters()", False),
])
def test_module_handed_to_a_loop_class_trained_or_frozen_is_silent(
        tmp_path, monkeypatch, freeze: str, params: str, moved: bool) -> None:  # type: ignore[no-untyped-def]
    path = _project(tmp_path, LOOP.format(freeze=freeze, params=params))
    assert _lines(path, "GT438") == []
    assert _run(path, monkeypatch)["MOVED"] is moved


def test_module_handed_to_a_loop_class_outside_the_optimizer_is_reported(
        tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path = _project(tmp_path, LOOP.format(freeze="", params="top.parameters()"))
    assert _lines(path, "GT438") == [26]
    assert not _run(path, monkeypatch)["MOVED"]


# the optimizer built in `__init__` over the parameter the module came in by
# (`self.core = core`, `SGD(core.parameters())`): the same module, it moves. Silent
KEEPER = '''
import torch
import torch.nn.functional as F

from blocks import make_mixer


class Keeper:
    def __init__(self, core):
        self.core = core
        self.opt = torch.optim.SGD(core.parameters(), lr=0.1)

    def go(self, steps):
        for _ in range(steps):
            loss = F.mse_loss(self.core(torch.randn(6, 4)), torch.randn(6, 4))
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()


core = make_mixer(4)
before = [p.detach().clone() for p in core.parameters()]
Keeper(core).go(3)
MOVED = not all(torch.equal(a, b) for a, b in zip(before, core.parameters()))
'''


def test_optimizer_over_the_constructor_parameter_is_silent(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path = _project(tmp_path, KEEPER)
    assert _lines(path, "GT438") == []
    assert _run(path, monkeypatch)["MOVED"]
