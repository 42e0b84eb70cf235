"""Session 39 (prec39c): numerics findings judged debatable on unseen code
(docs/triage/prec39c.md). Each fact has a silent look-alike and a buggy twin that is still
reported; the snippets run on real torch."""
from __future__ import annotations

import runpy
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")


def _write(root: Path, name: str, text: str) -> Path:
    p = root / name
    p.write_text(textwrap.dedent(text).lstrip("\n"))
    return p


def _found(path: Path, *codes: str) -> list[tuple[str, int]]:
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    got = check_paths([str(path)], Settings()).findings
    return sorted((f.code, f.line) for f in got if f.code in codes)


# -- GT753: a root whose operand comes only from a leaf nothing reads the gradient of -------
# NOTE [unread leaves]: `pos.requires_grad = True` proves `pos` a leaf; the angle's
# `sqrt(1 - c ** 2)` is built from it only (the helper reads `row`/`col` as indices), so its
# infinite derivative lands in `pos.grad`, which nothing reads (MoleculeSDE's score models).
# The twin is a force field: `autograd.grad(loss, pos, create_graph=True)` differentiates the
# same root again and the parameters' gradients become NaN.

_SILENT = 'import torch\nimport torch.nn as nn\n\n\ndef basis(pos, row, col):\n    return pos[row] - pos[col], pos[row] + pos[col]\n\n\nclass Score(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.project = nn.Linear(2, 1)\n\n    def forward(self, pos, edges):\n        pos.requires_grad = True\n        row, col = edges\n        a, b = basis(pos, row, col)\n        c = (a * b).sum(-1, keepdim=True) / (a.norm(dim=-1, keepdim=True)\n                                             * b.norm(dim=-1, keepdim=True) + 1e-8)\n        s = torch.sqrt(1 - c ** 2)\n        return self.project(torch.cat([s, c], -1)).pow(2).mean()\n\n\nmodel = Score()\npos = torch.tensor([[1.0, 0.0, 0.0], [3.0, 0.0, 0.0]])\nloss = model(pos, torch.tensor([[1], [0]]))\nloss.backward()\n'

_FORCE = 'import torch\nimport torch.nn as nn\n\n\ndef basis(pos, row, col):\n    return pos[row] - pos[col], pos[row] + pos[col]\n\n\nclass Score(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.project = nn.Linear(2, 1)\n\n    def forward(self, pos, edges):\n        pos.requires_grad = True\n        row, col = edges\n        a, b = basis(pos, row, col)\n        c = (a * b).sum(-1, keepdim=True) / (a.norm(dim=-1, keepdim=True)\n                                             * b.norm(dim=-1, keepdim=True) + 1e-8)\n        s = torch.sqrt(1 - c ** 2)\n        return self.project(torch.cat([s, c], -1)).pow(2).mean()\n\n\nmodel = Score()\npos = torch.tensor([[1.0, 0.0, 0.0], [3.0, 0.0, 0.0]])\nloss = model(pos, torch.tensor([[1], [0]]))\nforce = torch.autograd.grad(loss, pos, create_graph=True)[0]\nforce.pow(2).sum().backward()\n'


def test_root_of_unread_leaf_is_silent(tmp_path):
    p = _write(tmp_path, "score.py", _SILENT)
    assert _found(p, "GT753") == []
    env = runpy.run_path(str(p))
    assert all(torch.isfinite(q.grad).all() for q in env["model"].parameters())
    assert not torch.isfinite(env["pos"].grad).all()  # the inf lands only here


def test_root_of_leaf_whose_gradient_is_read_is_reported(tmp_path):
    p = _write(tmp_path, "force.py", _FORCE)
    assert _found(p, "GT753") == [("GT753", 20)]
    env = runpy.run_path(str(p))
    assert not all(torch.isfinite(q.grad).all() for q in env["model"].parameters())


def test_root_of_unflagged_argument_is_reported(tmp_path):
    # without the flag nothing proves `pos` a leaf: a caller may pass a graph
    p = _write(tmp_path, "score.py", _SILENT.replace("        pos.requires_grad = True\n", ""))
    assert _found(p, "GT753") == [("GT753", 19)]


def test_root_mixing_a_parameter_is_reported(tmp_path):
    # the operand also reads a parameter: its gradient goes through the root
    p = _write(tmp_path, "score.py", _SILENT.replace(
        "c = (a * b)", "c = torch.tanh(self.project.weight).sum() * (a * b)"))
    assert _found(p, "GT753") == [("GT753", 20)]


# -- the same, through a plain helper object and attributes that get no gradient ----------------
# MoleculeSDE's noise: `self.sde.marginal_prob(pos, t)` with `self.sde` a `VESDE` (an
# `abc.ABC` class holding numbers), `self.steps` a bound of `torch.randint`, `self.scales` a
# frozen `nn.Parameter`: none adds a graph, the root's infinite derivative reaches `pos.grad`
# only. Twins: the helper object runs a layer given by the model (its gradient goes through
# the root: NaN on torch), or the scales are trainable.

_SDE = 'import abc\n\nimport torch\nimport torch.nn as nn\n\n\nclass SDE(abc.ABC):\n    def __init__(self, n):\n        self.n = n\n\n\nclass VESDE(SDE):\n    def __init__(self, sigma_min, sigma_max, n):\n        super().__init__(n)\n        self.sigma_min = sigma_min\n        self.sigma_max = sigma_max\n\n    def marginal_prob(self, x, t):\n        return x, self.sigma_min * (self.sigma_max / self.sigma_min) ** t\n\n\nclass Score(nn.Module):\n    def __init__(self, sigma_min, sigma_max, steps):\n        super().__init__()\n        self.sde = VESDE(sigma_min, sigma_max, steps)\n        self.steps = steps\n        self.scales = nn.Parameter(torch.linspace(1, 2, steps), requires_grad=False)\n        self.project = nn.Linear(2, 1)\n\n    def forward(self, pos):\n        pos.requires_grad = True\n        step = torch.randint(0, self.steps, (pos.shape[0],))\n        t = (self.steps - step) / self.steps * self.scales[step]\n        mean, std = self.sde.marginal_prob(pos, t)\n        moved = mean * (1 + 0 * std[:, None])\n        a, b = moved[1:] - moved[:1], moved[1:] + moved[:1]\n        c = (a * b).sum(-1, keepdim=True) / (a.norm(dim=-1, keepdim=True)\n                                             * b.norm(dim=-1, keepdim=True) + 1e-8)\n        s = torch.sqrt(1 - c ** 2)\n        return self.project(torch.cat([s, c], -1)).pow(2).mean()\n\n\nmodel = Score(0.01, 50.0, 10)\npos = torch.tensor([[1.0, 0.0, 0.0], [3.0, 0.0, 0.0]])\nloss = model(pos)\nloss.backward()\n'

_SDE_NET = 'import abc\n\nimport torch\nimport torch.nn as nn\n\n\nclass SDE(abc.ABC):\n    def __init__(self, n):\n        self.n = n\n\n\nclass VESDE(SDE):\n    def __init__(self, sigma_min, sigma_max, n, net):\n        super().__init__(n)\n        self.sigma_min = sigma_min\n        self.sigma_max = sigma_max\n        self.net = net\n\n    def marginal_prob(self, x, t):\n        return self.net(x), self.sigma_min * (self.sigma_max / self.sigma_min) ** t\n\n\nclass Score(nn.Module):\n    def __init__(self, sigma_min, sigma_max, steps):\n        super().__init__()\n        self.shift = nn.Linear(3, 3)\n        self.sde = VESDE(sigma_min, sigma_max, steps, self.shift)\n        self.steps = steps\n        self.scales = nn.Parameter(torch.linspace(1, 2, steps), requires_grad=False)\n        self.project = nn.Linear(2, 1)\n\n    def forward(self, pos):\n        pos.requires_grad = True\n        step = torch.randint(0, self.steps, (pos.shape[0],))\n        t = (self.steps - step) / self.steps * self.scales[step]\n        mean, std = self.sde.marginal_prob(pos, t)\n        moved = mean * (1 + 0 * std[:, None])\n        a, b = moved[1:] - moved[:1], moved[1:] + moved[:1]\n        c = (a * b).sum(-1, keepdim=True) / (a.norm(dim=-1, keepdim=True)\n                                             * b.norm(dim=-1, keepdim=True) + 1e-8)\n        s = torch.sqrt(1 - c ** 2)\n        return self.project(torch.cat([s, c], -1)).pow(2).mean()\n\n\nmodel = Score(0.01, 50.0, 10)\nnn.init.eye_(model.shift.weight)\nnn.init.zeros_(model.shift.bias)\npos = torch.tensor([[1.0, 0.0, 0.0], [3.0, 0.0, 0.0]])\nloss = model(pos)\nloss.backward()\n'


def test_root_through_plain_helper_object_is_silent(tmp_path):
    p = _write(tmp_path, "sde.py", _SDE)
    assert _found(p, "GT753") == []
    env = runpy.run_path(str(p))
    assert all(torch.isfinite(q.grad).all() for q in env["model"].parameters()
               if q.grad is not None)
    assert not torch.isfinite(env["pos"].grad).all()


def test_root_through_helper_object_running_a_layer_is_reported(tmp_path):
    p = _write(tmp_path, "sde.py", _SDE_NET)
    assert _found(p, "GT753") == [("GT753", 41)]
    env = runpy.run_path(str(p))
    assert not torch.isfinite(env["model"].shift.weight.grad).all()


def test_root_through_trainable_scales_is_reported(tmp_path):
    p = _write(tmp_path, "sde.py", _SDE.replace("requires_grad=False)", "requires_grad=True)"))
    assert _found(p, "GT753") == [("GT753", 39)]
    env = runpy.run_path(str(p))
    assert not torch.isfinite(env["model"].scales.grad).all()


_TRAINER = '''
import torch
from pkg.model import Score

model = Score(0.01, 50.0, 10)
pos = torch.tensor([[1.0, 0.0, 0.0], [3.0, 0.0, 0.0]])
energy = model(pos)
force = torch.autograd.grad(energy, pos, create_graph=True)[0]
force.pow(2).sum().backward()
'''


def test_root_of_leaf_read_by_another_file_is_reported(tmp_path):
    # another file of the project takes the model's force: the leaf's gradient is read there
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    _write(tmp_path / "pkg", "model.py", _SDE)
    _write(tmp_path, "train.py", _TRAINER)
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    got = check_paths([str(tmp_path)], Settings()).findings
    assert sorted((f.code, f.line, Path(f.path).name) for f in got if f.code == "GT753") == [
        ("GT753", 39, "model.py")]
    _write(tmp_path, "train.py", _TRAINER.replace(
        "torch.autograd.grad(energy, pos, create_graph=True)[0]", "energy * 2"))
    got = check_paths([str(tmp_path)], Settings()).findings
    assert [f for f in got if f.code == "GT753"] == []
