"""Session 40 (prec40): false alarms of unseen code closed by the fact each lacked
(docs/triage/prec40.md). Each look-alike is the false-alarm shape (silent, and it runs as the
code means it); each buggy twin is the same code with the evidence present (reported at the
line, and it shows the error or the silent loss the message names)."""
from __future__ import annotations

import runpy
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")


def _write(root: Path, text: str, name: str = "case.py") -> Path:
    p = root / name
    p.write_text(textwrap.dedent(text).lstrip("\n"))
    return p


def _found(path: Path, code: str) -> list[tuple[str, int]]:
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    got = check_paths([str(path)], Settings()).findings
    return sorted((f.code, f.line) for f in got if f.code == code)


# -- GT708: a notebook's displayed line (NOTE [receiver shown next]) ---------------------------
# udacity's DL_PyTorch: `z.add(1)` ends a cell (shown), the next cell shows `z` unchanged, the
# one after calls `z.add_(1)`. A bare name as a statement does nothing in a script: the lines
# display values. The twin drops the display: the clipping is meant and never happens.

_SHOWN = '''
import torch

x = torch.rand(3, 2)
x

z = x + torch.ones(x.size())
z

z.add(1)

z

z.add_(1)
z
'''

_CLIPPED = '''
import torch

w = torch.randn(10) * 5
w

w.clamp(-1, 1)

scale = w.abs().max()
'''


def test_out_of_place_op_shown_then_its_receiver_is_silent(tmp_path: Path) -> None:
    p = _write(tmp_path, _SHOWN)
    assert _found(p, "GT708") == []
    ns = runpy.run_path(str(p))
    assert torch.equal(ns["z"], ns["x"] + 2)  # `add` changed nothing, `add_` did


def test_out_of_place_clip_read_afterwards_is_reported(tmp_path: Path) -> None:
    p = _write(tmp_path, _CLIPPED)
    assert _found(p, "GT708") == [("GT708", 6)]
    torch.manual_seed(0)
    ns = runpy.run_path(str(p))
    assert ns["scale"] > 1  # the clipping never happened


# -- GT506, GT507: a value made by a method of another object's attribute -----------------------
# (NOTE [proven shared graph]) `self.agent.policy.features(obs)`: a class of another file whose
# method returns detached features; nothing in sight runs a trained module on `obs`. Before,
# the spelling (`policy`) stood for a model call and the loop was taken to backpropagate into
# it again. The twins make the same value with a layer of the class in sight.

_ELSEWHERE = '''
import torch.nn as nn


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.policy = Policy()


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(4, 8)

    def features(self, x):
        return self.encoder(x).detach()
'''

_PROBE = '''
import torch
from torch import nn
from elsewhere_p40 import Agent


class Prober:
    def __init__(self, agent):
        self.agent = agent
        self.encoder = nn.Linear(4, 8)
        self.head = nn.Linear(8, 2)
        self.opt = torch.optim.SGD(self.head.parameters(), lr=0.1)

    def fit(self, obs, labels, steps=3):
        feats = {source}
        for _ in range(steps):
            self.opt.zero_grad()
            loss = nn.functional.cross_entropy(self.head(feats), labels)
            loss.backward()
            self.opt.step()


Prober(Agent()).fit(torch.randn(6, 4), torch.randint(0, 2, (6,)))
'''

_CARRY = '''
import torch
from torch import nn
from elsewhere_p40 import Agent


class Runner:
    def __init__(self, agent):
        self.agent = agent
        self.encoder = nn.Linear(4, 8)
        self.head = nn.Linear(8, 2)
        self.opt = torch.optim.SGD(self.head.parameters(), lr=0.1)

    def run(self, batches):
        h = torch.zeros(6, 4)
        for x, y in batches:
            h = {source}(x + h[:, :4])[:, :4]
            self.opt.zero_grad()
            loss = nn.functional.cross_entropy(self.head(torch.cat([h, h], 1)), y)
            loss.backward()
            self.opt.step()


Runner(Agent()).run([(torch.randn(6, 4), torch.randint(0, 2, (6,))) for _ in range(3)])
'''


def _project(root: Path, text: str) -> Path:
    _write(root, _ELSEWHERE, "elsewhere_p40.py")
    return _write(root, text, "learner.py")


def _run(path: Path) -> None:
    sys.path.insert(0, str(path.parent))
    try:
        runpy.run_path(str(path), run_name="__main__")
    finally:
        sys.path.remove(str(path.parent))
        sys.modules.pop("elsewhere_p40", None)


def test_value_from_a_method_of_another_objects_attribute_is_silent(tmp_path: Path) -> None:
    p = _project(tmp_path, _PROBE.replace("{source}", "self.agent.policy.features(obs)"))
    assert _found(p, "GT507") == []
    _run(p)  # trains: the features are detached where they are made


def test_value_from_a_layer_in_sight_is_reported(tmp_path: Path) -> None:
    p = _project(tmp_path, _PROBE.replace("{source}", "self.encoder(obs)"))
    assert _found(p, "GT507") == [("GT507", 14)]
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        _run(p)


def test_state_carried_through_another_objects_method_is_silent(tmp_path: Path) -> None:
    p = _project(tmp_path, _CARRY.replace("{source}", "self.agent.policy.features"))
    assert _found(p, "GT506") == []
    _run(p)


def test_state_carried_through_a_layer_in_sight_is_reported(tmp_path: Path) -> None:
    p = _project(tmp_path, _CARRY.replace("{source}", "self.encoder"))
    assert _found(p, "GT506") == [("GT506", 16)]
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        _run(p)


# -- GT531: a flag kept in a dict entry decides which scheduler steps where ----------------------
# Bengaliai's shape with its flag in a config dict: the plateau's arm sets `cfg["per_iter"] =
# False`, so the per-batch `scheduler.step()` under `if cfg["per_iter"]:` never runs with the
# plateau (`_exclusive_settings` reads the entry as a setting). The twin sets another key
# there: the plateau is stepped per batch without its metric.

_SCHEDULED = '''
import torch


def train(model, loader, val, name, epochs, lr=0.1):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    cfg = {"per_iter": True, "warmup": True}
    if name == "plateau":
        scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="max")
        cfg["{key}"] = False
    else:
        scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, lr, total_steps=100)
    for _ in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
            if cfg["per_iter"]:
                scheduler.step()
        if not cfg["per_iter"]:
            scheduler.step(val())


batches = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(2)]
train(torch.nn.Linear(3, 1), batches, lambda: 0.5, "plateau", 2)
'''


def test_plateau_kept_off_the_per_batch_step_by_a_dict_flag_is_silent(tmp_path: Path) -> None:
    p = _write(tmp_path, _SCHEDULED.replace("{key}", "per_iter"))
    assert _found(p, "GT531") == []
    runpy.run_path(str(p))


def test_plateau_stepped_per_batch_with_the_dict_flag_left_on_is_reported(tmp_path: Path
                                                                          ) -> None:
    p = _write(tmp_path, _SCHEDULED.replace("{key}", "warmup"))
    assert _found(p, "GT531") == [("GT531", 18)]
    with pytest.raises(TypeError, match="metrics"):
        runpy.run_path(str(p))


# the owner of the method is trained by the loop's own optimizer (`self.model`, a module class
# of another file, stepped by `self.opt`): `self.model.rnn(x, hidden)` carries its graph
_NETS = '''
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(4, 4, batch_first=True)
        self.head = nn.Linear(4, 2)
'''

_TRAINED = '''
import torch
from nets_p40 import Net


class Trainer:
    def __init__(self):
        self.model = Net()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def run(self, batches):
        hidden = torch.zeros(1, 3, 4)
        for x, y in batches:
            self.opt.zero_grad()
            out, hidden = self.model.rnn(x, hidden)
            loss = torch.nn.functional.cross_entropy(self.model.head(out[:, -1]), y)
            loss.backward()
            self.opt.step()


Trainer().run([(torch.randn(3, 5, 4), torch.randint(0, 2, (3,))) for _ in range(3)])
'''


def test_state_carried_through_a_layer_of_the_trained_object_is_reported(tmp_path: Path
                                                                         ) -> None:
    _write(tmp_path, _NETS, "nets_p40.py")
    p = _write(tmp_path, _TRAINED, "trainer.py")
    assert _found(p, "GT506") == [("GT506", 14)]
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            runpy.run_path(str(p))
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("nets_p40", None)
