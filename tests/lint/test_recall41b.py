"""Session 41, helper recall41b: facts that name the root line of real-world misses in other
words than the cases. Each pair: a look-alike that is silent (and builds/trains as meant on real
torch) and a buggy twin reported on its line (and shown wrong on real torch)."""
from __future__ import annotations

import textwrap
import warnings

import pytest

from gradtrace.lint import check_source
from imports_as_found import imports_as_found

torch = pytest.importorskip("torch")

# NOTE [parameter gathered twice] (GT557): a wrapper exposes its child's parameter as a
# property; a YOLO-style loop over `modules()` meets both and puts the tensor in two groups
PROPERTY_TWIN = '''
import torch
from torch import nn


class NormPad(nn.Module):
    def __init__(self, c, pad):
        super().__init__()
        self.norm = nn.BatchNorm2d(c)
        self.pad = pad

    def forward(self, x):
        return nn.functional.pad(self.norm(x), [self.pad] * 4)

    @property
    def weight(self):
        return self.norm.weight


class Branch(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(c, c, 1, bias=False), NormPad(c, 1),
                                  nn.Conv2d(c, c, 3, bias=False))

    def forward(self, x):
        return self.body(x)


torch.manual_seed(0)
net = nn.Sequential(Branch(3), nn.Flatten(), nn.LazyLinear(2))
decayed, plain = [], []
for v in net.modules():
    if isinstance(v, nn.BatchNorm2d):
        plain.append(v.weight)
    elif hasattr(v, 'weight') and isinstance(v.weight, nn.Parameter):
        decayed.append(v.weight)
RESULT = lambda: torch.optim.SGD([{'params': decayed, 'weight_decay': 1e-4}, {'params': plain}], lr=0.1)
'''
# look-alike: the wrapper's class is tested first, so only its BatchNorm appends the weight
PROPERTY_LOOKALIKE = PROPERTY_TWIN.replace(
    "    if isinstance(v, nn.BatchNorm2d):\n",
    "    if isinstance(v, NormPad):\n        continue\n    if isinstance(v, nn.BatchNorm2d):\n")
# look-alike: the property returns a parameter of its own, not a child's
OWN_PARAMETER = PROPERTY_TWIN.replace(
    "        return self.norm.weight\n", "        return self.scale\n").replace(
    "        self.pad = pad\n", "        self.pad = pad\n        self.scale = nn.Parameter(torch.ones(c))\n")

# the same bug in other words, the cause one call further away: `named_modules()`, a
# LayerNorm wrapper, the groups gathered by a helper and the optimizer built by its caller
HELPER_TWIN = '''
import torch
from torch import nn


class Gated(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.norm = nn.LayerNorm(n)

    def forward(self, x):
        return self.norm(x) * torch.sigmoid(x)

    @property
    def weight(self):
        return self.norm.weight


def split_groups(model):
    decay, no_decay = [], []
    for _, m in model.named_modules():
        if isinstance(m, nn.Linear):
            decay.append(m.weight)
            no_decay.append(m.bias)
        elif isinstance(m, nn.LayerNorm):
            no_decay.append(m.weight)
            no_decay.append(m.bias)
        elif hasattr(m, 'weight') and isinstance(m.weight, nn.Parameter):
            decay.append(m.weight)
    return no_decay, decay


def make_optimizer(model):
    plain, decayed = split_groups(model)
    return torch.optim.AdamW([{'params': plain, 'weight_decay': 0.0},
                              {'params': decayed, 'weight_decay': 0.01}], lr=1e-3)


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 4), Gated(4), nn.Linear(4, 2))
RESULT = lambda: make_optimizer(model)
'''
# look-alike: the wrapper is skipped before the tests
HELPER_LOOKALIKE = HELPER_TWIN.replace(
    "        if isinstance(m, nn.Linear):\n",
    "        if isinstance(m, Gated):\n            continue\n        if isinstance(m, nn.Linear):\n")
# twin: the other weights are not decayed either, so the wrapper and its LayerNorm put the one
# tensor twice in the no-decay list (torch warns; the tensor is stepped twice): reported at
# the wrapper's append
ONE_GROUP_TWIN = HELPER_TWIN.replace(
    "            decay.append(m.weight)\n    return", "            no_decay.append(m.weight)  # the rest\n    return")

# NOTE [parameter gathered twice] (GT562): the recursive `parameters()` of every module a
# class-name filter lets through, the model itself first
RECURSIVE_TWIN = '''
import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.stem(x).mean((2, 3)))


def norm_and_rest(net):
    norms, rest = [], []
    for name, mod in net.named_modules():
        if type(mod).__name__ in ('Sequential', 'ModuleList'):
            continue
        if isinstance(mod, (nn.BatchNorm2d, nn.LayerNorm)):
            norms += list(mod.parameters())
        else:
            rest += list(mod.parameters())
    return norms, rest


torch.manual_seed(0)
enc = Encoder()
norm_params, rest_params = norm_and_rest(enc)
RESULT = lambda: torch.optim.SGD([{'params': rest_params, 'weight_decay': 5e-4},
                                  {'params': norm_params}], lr=0.1, momentum=0.9)
'''
# look-alike: the filter keeps out every module that has children (structure, not spelling)
RECURSIVE_LOOKALIKE = RECURSIVE_TWIN.replace(
    "        if type(mod).__name__ in ('Sequential', 'ModuleList'):\n",
    "        if list(mod.children()):\n")
# look-alike: the rest is gathered without recursion
NOT_RECURSIVE = RECURSIVE_TWIN.replace(
    "            rest += list(mod.parameters())\n",
    "            rest += list(mod.parameters(recurse=False))\n")
# look-alike: only the torch layers named by the test gather, the else arm does nothing
ONLY_NORMS = RECURSIVE_TWIN.replace(
    "        else:\n            rest += list(mod.parameters())\n", "").replace(
    "norm_params, rest_params = norm_and_rest(enc)",
    "norm_params, _ = norm_and_rest(enc)\nrest_params = [p for n, p in enc.named_parameters() if 'stem.1' not in n]")

# the same fact in other words: one group per module (`{"params": m.parameters()}`), a
# comprehension over them, the model's class known through the helper's caller
GROUPS_TWIN = '''
import torch
from torch import nn


def groups_of(model, lr):
    groups = []
    for m in model.modules():
        if isinstance(m, nn.Embedding):
            groups.append({"params": m.parameters(), "lr": lr * 10})
        elif not isinstance(m, (nn.Sequential, nn.ModuleList)):
            groups.append({"params": [p for p in m.parameters() if p.requires_grad], "lr": lr})
    return groups


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(self.emb(x))


net = Net()
RESULT = lambda: torch.optim.SGD(groups_of(net, 0.1), lr=0.1)
'''
# look-alike: the model is an nn.Sequential, which the container test keeps out
GROUPS_LOOKALIKE = GROUPS_TWIN.replace("net = Net()", "net = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 2))")


def _lines(src: str, code: str) -> list[int]:
    return [f.line for f in check_source(textwrap.dedent(src), path="m.py") if f.code == code]


def _line(src: str, text: str) -> int:
    return next(i for i, s in enumerate(src.splitlines(), 1) if text in s)


def _build(src: str) -> str:
    """'error', 'duplicate' (torch warns) or 'ok' for the source's optimizer."""
    env: dict = {}
    exec(compile(src, "m.py", "exec"), env)  # noqa: S102 - the test's own source
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            env["RESULT"]()
        except ValueError as e:
            assert "more than one parameter group" in str(e)
            return "error"
    return "duplicate" if any("duplicate parameters" in str(w.message) for w in seen) else "ok"


@pytest.mark.parametrize("src,code,at,verdict", [
    (PROPERTY_TWIN, "GT557", "    if isinstance(v, nn.BatchNorm2d):", "error"),
    (HELPER_TWIN, "GT557", "        elif isinstance(m, nn.LayerNorm):", "error"),
    (ONE_GROUP_TWIN, "GT557", "  # the rest", "duplicate"),
    (GROUPS_TWIN, "GT562", '            groups.append({"params": [p for p', "error"),
    (RECURSIVE_TWIN, "GT562", "        if type(mod).__name__ in", "error"),
])
def test_twin_reported_on_its_line(src, code, at, verdict):
    assert _lines(src, code) == [_line(src, at)]
    assert _build(src) == verdict


@pytest.mark.parametrize("src", [PROPERTY_LOOKALIKE, OWN_PARAMETER, HELPER_LOOKALIKE,
                                 RECURSIVE_LOOKALIKE, NOT_RECURSIVE, ONLY_NORMS,
                                 GROUPS_LOOKALIKE])
def test_lookalike_silent(src):
    found = [f.code for f in check_source(textwrap.dedent(src), path="m.py")
             if f.code in ("GT557", "GT562")]
    assert found == []
    assert _build(src) == "ok"


# NOTE [duplicate check bypassed] (GT563): a group builder recursing by children checks ids
# before appending, but 1-D parameters are appended (and skipped past the check) first; a
# LayerNorm shared by two branches is met twice
BYPASS_TWIN = '''
import torch
from torch import nn


class GroupBuilder:
    def __init__(self, decay):
        self.decay = decay
        self.ids = set()

    def collect(self, module, out):
        for name, p in module.named_parameters(recurse=False):
            if p.ndim == 1:
                out.append({'params': [p], 'weight_decay': 0.0})
                continue
            if id(p) in self.ids:
                continue
            self.ids.add(id(p))
            out.append({'params': [p], 'weight_decay': self.decay})
        for child in module.children():
            self.collect(child, out)


shared = nn.LayerNorm(4)
net = nn.ModuleDict({'a': nn.Sequential(nn.Linear(4, 4), shared),
                     'b': nn.Sequential(nn.Linear(4, 4), shared)})
groups = []
GroupBuilder(1e-4).collect(net, groups)
RESULT = lambda: torch.optim.AdamW(groups, lr=1e-3)
'''
# look-alike: the id check runs first
BYPASS_LOOKALIKE = BYPASS_TWIN.replace(
    "            if p.ndim == 1:\n"
    "                out.append({'params': [p], 'weight_decay': 0.0})\n"
    "                continue\n"
    "            if id(p) in self.ids:\n"
    "                continue\n"
    "            self.ids.add(id(p))\n",
    "            if id(p) in self.ids:\n"
    "                continue\n"
    "            self.ids.add(id(p))\n"
    "            if p.ndim == 1:\n"
    "                out.append({'params': [p], 'weight_decay': 0.0})\n"
    "                continue\n")
# look-alike: the early branch records the id too
BYPASS_RECORDED = BYPASS_TWIN.replace(
    "                out.append({'params': [p], 'weight_decay': 0.0})\n",
    "                if id(p) not in self.ids:\n"
    "                    out.append({'params': [p], 'weight_decay': 0.0})\n"
    "                self.ids.add(id(p))\n")
# look-alike: the early branch leaves the parameter out
BYPASS_SKIPPED = BYPASS_TWIN.replace(
    "                out.append({'params': [p], 'weight_decay': 0.0})\n", "")


def test_bypass_twin_reported():
    assert _lines(BYPASS_TWIN, "GT563") == [_line(BYPASS_TWIN, "            if p.ndim == 1:")]
    assert _build(BYPASS_TWIN) == "error"


@pytest.mark.parametrize("src", [BYPASS_LOOKALIKE, BYPASS_RECORDED, BYPASS_SKIPPED])
def test_bypass_lookalike_silent(src):
    assert _lines(src, "GT563") == []
    assert _build(src) == "ok"


# GT557 across files (NOTE [project index]): the wrapper in `blocks.py`, the model built in
# `nets.py` (which imports it), the YOLO-style groups in `train.py` (which imports only nets)
BLOCKS = '''
import torch
from torch import nn


class NormPad(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.norm = nn.BatchNorm2d(c)

    def forward(self, x):
        return nn.functional.pad(self.norm(x), [1] * 4)

    @property
    def weight(self):
        return self.norm.weight


class Branch(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(c, c, 1, bias=False), NormPad(c))

    def forward(self, x):
        return self.body(x)
'''
NETS = '''
from torch import nn
from blocks import Branch


def build():
    return nn.Sequential(Branch(3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3, 2))
'''
TRAIN = '''
import torch
from torch import nn
from nets import build

model = build()
g_norm, g_decay = [], []
for _, v in model.named_modules():
    if isinstance(v, nn.BatchNorm2d):
        g_norm.append(v.weight)
    elif hasattr(v, 'weight') and isinstance(v.weight, nn.Parameter):
        g_decay.append(v.weight)
optimizer = torch.optim.SGD(g_norm, lr=0.01)
optimizer.add_param_group({'params': g_decay, 'weight_decay': 5e-4})
'''
TRAIN_OK = TRAIN.replace(
    "from nets import build\n", "from nets import build\nfrom blocks import NormPad\n").replace(
    "    if isinstance(v, nn.BatchNorm2d):\n",
    "    if isinstance(v, NormPad):\n        continue\n    if isinstance(v, nn.BatchNorm2d):\n")


def _project(root, train: str) -> list[tuple[str, int, str]]:
    import runpy
    from pathlib import Path

    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    for name, text in {"blocks.py": BLOCKS, "nets.py": NETS, "train.py": train}.items():
        (root / name).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    found = sorted((Path(f.path).name, f.line, f.code) for f in check_paths(
        [str(root)], Settings(select=("GT557",))).findings)
    with imports_as_found(root):  # `blocks`, `nets` gone afterwards
        try:
            runpy.run_path(str(root / "train.py"), run_name="__main__")
            built = "ok"
        except ValueError as e:
            assert "more than one parameter group" in str(e)
            built = "error"
    return found + [("built", 0, built)]


def test_property_wrapper_two_files_away_reported(tmp_path):
    line = _line(textwrap.dedent(TRAIN).lstrip("\n"), "    if isinstance(v, nn.BatchNorm2d):")
    assert _project(tmp_path, TRAIN) == [("train.py", line, "GT557"), ("built", 0, "error")]


def test_property_wrapper_two_files_away_skipped_is_silent(tmp_path):
    assert _project(tmp_path, TRAIN_OK) == [("built", 0, "ok")]
