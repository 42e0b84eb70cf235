"""The static facts built for held-out batch 44 (docs/triage/ho50.md).

1. A ``nn.ModuleList(xs)`` / ``nn.Sequential(*xs)`` over a local list ``xs`` of ``__init__``
   holds what ``__init__`` puts in ``xs`` (NOTE [container of a local list]): kept in a plain
   list on ``self`` (``self.rows.append(nn.ModuleList(row))``), its layers are unregistered
   (GT401).
2. ``self.train()`` / ``self.eval()`` as a condition switches the mode and returns the module,
   always true (NOTE [mode setter as a test], GT132).

Buggy twins on their line and silent look-alikes, in other spellings than the cases'; every
snippet runs on real torch and the test checks what the finding claims."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace import check_source

torch = pytest.importorskip("torch")


def _found(src: str) -> list[tuple[str, int]]:
    return sorted((f.code, f.line) for f in check_source(textwrap.dedent(src)))


def _run(src: str) -> dict:
    ns: dict = {}
    exec(compile(textwrap.dedent(src), "<snippet>", "exec"), ns)
    return ns


# ---- 1: GT401 through a container built from a local list ------------------------------------

ROWS = '''
import torch
import torch.nn as nn

class Mixer(nn.Module):
    def __init__(self, n=3, c=4):
        super().__init__()
        self.rows = {holder}
        for i in range(n):
            row = [nn.Identity()]
            for j in range(n - 1):
                row.append(nn.Linear(c, c))
            self.rows.append({wrap})

    def forward(self, x):
        return sum(layer(x) for r in self.rows for layer in r)

model = Mixer()
n_params = len(list(model.parameters()))
'''


def test_plain_list_of_module_lists_from_local_lists_is_reported():
    src = ROWS.format(holder="[]", wrap="nn.ModuleList(row)")
    assert [c for c in _found(src) if c[0] == "GT401"] == [("GT401", 8)]
    assert _run(src)["n_params"] == 0  # the Linear layers are not registered


def test_tuple_literal_holding_a_module_list_of_a_local_list_is_reported():
    src = """
    import torch.nn as nn

    class Pair(nn.Module):
        def __init__(self, c=4):
            super().__init__()
            blocks = []
            blocks += [nn.Conv1d(c, c, 1)]
            self.parts = (nn.ModuleList(blocks),)

        def forward(self, x):
            return self.parts[0][0](x)

    n_params = len(list(Pair().parameters()))
    """
    assert [c for c in _found(src) if c[0] == "GT401"] == [("GT401", 9)]
    assert _run(src)["n_params"] == 0


def test_module_list_of_module_lists_is_silent():
    src = ROWS.format(holder="nn.ModuleList()", wrap="nn.ModuleList(row)")
    assert [c for c in _found(src) if c[0] == "GT401"] == []
    assert _run(src)["n_params"] == 12  # 3 rows x 2 Linear x (weight, bias)


def test_local_list_of_parameter_free_layers_is_silent():
    src = ROWS.format(holder="[]", wrap="nn.ModuleList(row)").replace(
        "row.append(nn.Linear(c, c))", "row.append(nn.ReLU())")
    assert [c for c in _found(src) if c[0] == "GT401"] == []


def test_local_list_stored_elsewhere_is_silent():
    # the same layers are registered through `self.flat`: the rows are only a second view
    src = ROWS.format(holder="[]", wrap="nn.ModuleList(row)").replace(
        "            self.rows.append(nn.ModuleList(row))",
        "            self.rows.append(nn.ModuleList(row))\n            self.flat.extend(row)").replace(
        "        self.rows = []", "        self.rows = []\n        self.flat = nn.ModuleList()")
    assert [c for c in _found(src) if c[0] == "GT401"] == []
    assert _run(src)["n_params"] == 12


# ---- 2: GT132, the mode setter as a condition -------------------------------------------------

DROP = '''
import torch
import torch.nn as nn

class Noisy(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        h = self.lin(x)
        while {test}:
            h = h + torch.randn_like(h)
            break
        return self.drop(h)

torch.manual_seed(0)
model = Noisy().eval()
x = torch.ones(2, 3)
with torch.no_grad():
    same = torch.equal(model(x), model(x))
still_eval = not model.training
'''


def test_train_setter_in_a_while_test_is_reported():
    src = DROP.format(test="self.train(True) and h.numel() > 0")
    assert _found(src) == [("GT132", 13)]
    ns = _run(src)
    assert not ns["same"] and not ns["still_eval"]  # noise drawn, the model left in training


def test_training_flag_in_a_while_test_is_silent():
    src = DROP.format(test="self.training and h.numel() > 0")
    assert _found(src) == []
    ns = _run(src)
    assert ns["same"] and ns["still_eval"]


def test_setter_on_a_container_module_or_an_override_is_silent():
    # an empty Sequential is false; a redefined `train` returns what it likes
    src = '''
    import torch.nn as nn

    class Stack(nn.Sequential):
        def forward(self, x):
            return x if self.eval() else -x

    class Runner(nn.Module):
        def train(self, mode=True):
            super().train(mode)
            return mode

        def forward(self, x):
            if self.train():
                return x
            return -x

    assert Stack()(1) == -1
    '''
    assert _found(src) == []
    _run(src)


# ---- 3: GT133, an in-place activation module applied to the module's own parameter -----------

FUSE = '''
import torch
import torch.nn as nn

class Blend(nn.Module):
    def __init__(self):
        super().__init__()
        self.mix = nn.Parameter(torch.ones(3))
        self.clip = nn.LeakyReLU(0.2)

    def forward(self, xs):
        w = self.clip({arg})
        return sum(wi * x for wi, x in zip(w / w.sum(), xs))

def speed_up(net):
    for name, mod in net.named_modules():
        kind = type(mod)
        if kind is nn.BatchNorm2d:
            mod.eps = 1e-3
        elif kind in (nn.LeakyReLU, nn.Hardswish):
            mod.inplace = True

net = Blend()
speed_up(net)
try:
    net([torch.ones(2)] * 3).sum().backward()
    raised = None
except RuntimeError as e:
    raised = str(e)
'''


def test_pass_making_the_activation_in_place_is_reported_on_the_flag():
    src = FUSE.format(arg="self.mix")
    assert _found(src) == [("GT133", 21)]
    assert "leaf Variable that requires grad" in _run(src)["raised"]


def test_activation_on_a_copy_of_the_parameter_is_silent():
    src = FUSE.format(arg="self.mix.clone()")
    assert _found(src) == []
    assert _run(src)["raised"] is None


def test_pass_over_other_classes_is_silent():
    src = FUSE.format(arg="self.mix").replace("(nn.LeakyReLU, nn.Hardswish)", "(nn.ReLU, nn.SiLU)")
    assert _found(src) == []
    assert _run(src)["raised"] is None


def test_activation_built_in_place_is_reported_on_the_call():
    src = FUSE.format(arg="self.mix").replace("nn.LeakyReLU(0.2)", "nn.LeakyReLU(0.2, inplace=True)"
                                               ).replace("speed_up(net)\n", "")
    assert _found(src) == [("GT133", 12)]
    assert "leaf Variable that requires grad" in _run(src)["raised"]


# ---- 4: GT134, a loss method's parameters outside forward under find_unused_parameters --------

TAGGER = '''
import torch
import torch.nn as nn

class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.pair = nn.Parameter(torch.zeros(4, 4))

    def score(self, s, tags):
        return (s @ self.pair).gather(1, tags).mean()

class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(8, 4)
        self.head = Scorer()

    def forward(self, x):
        return {fwd}

    def _crf(self, s, tags):
        return self.head.score(s, tags)

    def nll(self, s, tags):
        return self._crf(s, tags)

def wrap(model):
    return nn.parallel.DistributedDataParallel(model, find_unused_parameters={flag})

def fit(model, steps=2):
    net = wrap(model)
    for _ in range(steps):
        s = net(torch.randn(3, 8))
        total = net.module.nll(s, torch.zeros(3, 1, dtype=torch.long))
        (total * 1.0).backward()

def main():
    try:
        fit(Tagger())
        return None
    except RuntimeError as e:
        return str(e)
'''


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available() or not dist.is_gloo_available() or dist.is_initialized():
        pytest.skip("needs a free gloo process group")
    store = tmp_path_factory.mktemp("pg") / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def _ddp_run(src: str) -> str | None:
    return _run(src)["main"]()


def test_loss_method_reading_a_part_forward_never_runs_is_reported_on_the_wrap(group):
    src = TAGGER.format(fwd="self.enc(x)", flag="True")
    assert _found(src) == [("GT134", 29)]
    assert "mark a variable ready only once" in _ddp_run(src)


def test_same_loss_method_without_find_unused_is_silent(group):
    src = TAGGER.format(fwd="self.enc(x)", flag="False")
    assert _found(src) == []
    assert _ddp_run(src) is None


def test_part_also_run_by_forward_is_silent(group):
    src = TAGGER.format(fwd="self.enc(x) + 0 * self.head.pair.sum()", flag="True")
    assert _found(src) == []
    assert _ddp_run(src) is None
