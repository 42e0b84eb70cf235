"""The static facts widened for held-out batch 42 (docs/triage/ho42.md).

1. A constant index (``-1`` included) picks its element of an ``nn.ModuleList`` /
   ``nn.Sequential`` built from a literal, when no ``*spread`` lies between it and the end it
   counts from (``analysis/elements.indexed``): ``self.model[-1]`` of
   ``nn.ModuleList([*self.backbone, Detect()])`` is the ``Detect``, so GT302 reads
   ``b = mi.bias.view(...)`` over its layers and the in-place add into that view.
2. An accessor returning a list of ``self`` tensors is not the caller's parameter group when
   the file builds its own optimizer and only iterates or counts the accessor's lists
   (NOTE [accessor only looked at]): GT402 names the plain tensors that require grad.

Buggy twins on their line and silent look-alikes; the GT302 snippets run on real torch and the
test checks what the finding claims (the build raises, or not); the GT402 twin checks that the
tensors get gradients and that no optimizer holds them."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace import check_source

torch = pytest.importorskip("torch")

HEAD = '''
import math
import torch
import torch.nn as nn

class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.m = nn.ModuleList(nn.Conv2d(4, 6, 1) for _ in range(2))
        self.stride = torch.tensor([8.0, 16.0])

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.ModuleList([nn.Conv2d(3, 4, 1)])
        self.model = nn.ModuleList([{elements}])
        self.seed()

    def forward(self, x):
        return self.model[-1].m[0](self.model[0](x))

    def seed(self):
        m = self.model[{index}]
        for mi, s in zip(m.m, m.stride):
            b = mi.bias.view(2, -1)
            {write}

net = Net()
net(torch.ones(1, 3, 2, 2)).sum().backward()
'''
INTO_VIEW = "b[:, 1] += math.log(8 / s)"


def _src(elements: str, index: str, write: str = INTO_VIEW) -> str:
    return textwrap.dedent(HEAD).format(elements=elements, index=index, write=write)


def _findings(src: str, code: str) -> list[int]:
    return sorted(f.line for f in check_source(src, path="snippet.py") if f.code == code)


def _raises(src: str) -> bool:
    try:
        exec(compile(src, "snippet.py", "exec"), {})
    except RuntimeError as e:
        assert "a view of a leaf Variable that requires grad" in str(e)
        return True
    return False


WRITE_LINE = 26


@pytest.mark.parametrize("elements,index", [
    ("*self.stem, Head()", "-1"),       # the spread before the last element
    ("nn.Conv2d(3, 4, 1), Head()", "1"),  # mixed classes, a positive index
])
def test_indexed_element_view_write_is_gt302(elements: str, index: str) -> None:
    src = _src(elements, index)
    assert src.splitlines()[WRITE_LINE - 1].strip() == INTO_VIEW
    assert WRITE_LINE in _findings(src, "GT302")
    assert _raises(src)


def test_indexed_element_written_through_data_is_silent() -> None:
    src = _src("*self.stem, Head()", "-1", "b[:, 1].data += math.log(8 / s)")
    assert _findings(src, "GT302") == []
    assert not _raises(src)


def test_spread_after_the_index_leaves_the_element_unknown() -> None:
    """``[Head(), *self.stem]``: ``[-1]`` may be any element of the spread (here a Conv2d,
    whose ``.m`` does not exist); nothing is claimed."""
    src = _src("Head(), *self.stem", "-1")
    assert _findings(src, "GT302") == []


FUSION = '''
import torch
import torch.nn as nn

class Fuse(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.w1 = torch.tensor(1.0, requires_grad=True)
        self.w2 = torch.tensor(1.0, requires_grad=True)

    def weights(self):
        return [self.w1, self.w2]

    def forward(self, x):
        return (self.w1 * self.a(x) + self.w2 * x) / (self.w1 + self.w2 + 1e-4)

model = Fuse()
opt = torch.optim.SGD({params}, lr=0.5)
ws = model.weights()
print(len(ws), [w.item() for w in ws])
model(torch.randn(4, 3)).pow(2).mean().backward()
held = {id(p) for g in opt.param_groups for p in g["params"]}
trained = [id(w) in held for w in ws]
'''


def _fusion(params: str) -> str:
    return textwrap.dedent(FUSION).replace("{params}", params)


def _run(src: str) -> dict:
    """Run the snippet; the optimizer only records what it is given (the first optimizer
    built in a process costs seconds of lazy imports, and no step is needed here)."""
    env: dict = {"Given": lambda params, lr: type("Opt", (), {
        "param_groups": [{"params": list(params)}], "zero_grad": lambda self: None})()}
    exec(compile(src.replace("torch.optim.SGD(", "Given("), "snippet.py", "exec"), env)
    return env


def test_accessor_only_looked_at_is_gt402() -> None:
    src = _fusion("model.parameters()")
    assert _findings(src, "GT402") == [9, 10]
    env = _run(src)
    assert env["trained"] == [False, False]  # gradients, but no optimizer holds them
    assert all(w.grad is not None for w in env["ws"])


def test_accessor_handed_to_the_optimizer_is_silent() -> None:
    src = _fusion("list(model.parameters()) + model.weights()")
    assert _findings(src, "GT402") == []
    env = _run(src)
    assert env["trained"] == [True, True]


def test_accessor_list_passed_on_is_silent() -> None:
    """The list handed to a function (a group built elsewhere): unknown, left alone."""
    src = _fusion("model.parameters()").replace("print(len(ws)", "register(ws)\nprint(len(ws)")
    src = "def register(ws):\n    pass\n" + src
    assert _findings(src, "GT402") == []


EVAL_HEAD = '''
import torch
import torch.nn as nn

class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)

    def forward(self, x):
        x = self.conv(x)
        if not self.training:
            y = x.sigmoid()
            y[..., 0:2] = y[..., 0:2] * 2.0 - 0.5
            return y
        return x

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = Head()

    def forward(self, x):
        return self.head(x)

def attack(model, img):
    delta = torch.zeros_like(img, requires_grad=True)
    for _ in range(2):
        model(img + delta).max().backward()
        with torch.no_grad():
            delta -= 0.01 * delta.grad.sign()
        delta.grad.zero_()
    return delta

model = Net(){mode}
{after}
attack(model, torch.rand(1, 3, 4, 4))
'''
EVAL_WRITE = 14


def _eval_src(mode: str, after: str = "") -> str:
    return textwrap.dedent(EVAL_HEAD).replace("{mode}", mode).replace("{after}", after)


def _raises_saved(src: str) -> bool:
    try:
        exec(compile(src, "snippet.py", "exec"), {})
    except RuntimeError as e:
        assert "modified by an inplace operation" in str(e)
        return True
    return False


@pytest.mark.parametrize("mode,after", [(".eval()", ""), ("", "model.train(False)")])
def test_eval_branch_backpropagated_is_gt602(mode: str, after: str) -> None:
    src = _eval_src(mode, after)
    assert src.splitlines()[EVAL_WRITE - 1].strip().startswith("y[..., 0:2] =")
    assert _findings(src, "GT602") == [EVAL_WRITE]
    assert _raises_saved(src)


def test_eval_branch_of_a_training_instance_is_silent() -> None:
    """Never put in eval mode: the arm does not run under the backward."""
    src = _eval_src("")
    assert _findings(src, "GT602") == []
    assert not _raises_saved(src)


def test_eval_branch_back_in_train_mode_is_silent() -> None:
    """Put back in train mode: the file does not show which mode the backward meets."""
    src = _eval_src(".eval()", "model.train()")
    assert _findings(src, "GT602") == []
    assert not _raises_saved(src)


def test_eval_instance_run_without_grad_is_silent() -> None:
    src = _eval_src(".eval()").replace("model(img + delta).max().backward()",
                                       "with torch.no_grad():\n            model(img + delta)\n"
                                       "        (img + delta).sum().backward()")
    assert _findings(src, "GT602") == []
    assert not _raises_saved(src)


GATE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F

class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.loc = nn.Parameter(torch.zeros(2, 3))
        self.mask = nn.Parameter(torch.zeros(2, 3), requires_grad=False)

    def _mask(self):
        m = torch.sigmoid(self.loc)
        {store}
        return {returned}

    def forward(self, x):
        return F.linear(x, self.lin.weight * self._mask(), self.lin.bias)

g = Gate()
(loc_grad,) = torch.autograd.grad(g(torch.randn(4, 3)).sum(), g.loc, allow_unused=True)
'''
STORE_LINE = 15


def _gate(store: str, returned: str) -> str:
    return textwrap.dedent(GATE).replace("{store}", store).replace("{returned}", returned)


def _loc_grad(src: str):  # type: ignore[no-untyped-def]
    env: dict = {}
    exec(compile(src, "snippet.py", "exec"), env)
    return env["loc_grad"]


def test_parameter_replaced_through_data_then_used_is_gt113() -> None:
    src = _gate("self.mask.data = m", "self.mask")
    assert _findings(src, "GT113") == [STORE_LINE]
    assert _loc_grad(src) is None  # the task never reaches `loc`


def test_parameter_logged_through_data_computed_value_used_is_silent() -> None:
    src = _gate("self.mask.data = m.detach()", "m")
    assert _findings(src, "GT113") == []
    assert _loc_grad(src) is not None


def test_parameter_updated_from_itself_is_silent() -> None:
    """A running update of the Parameter's own value (it reads what it replaces)."""
    src = _gate("self.mask.data = 0.9 * self.mask + 0.1 * m", "self.mask")
    assert _findings(src, "GT113") == []


TRAINER = '''
import torch
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(4, 4)
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.enc(x))

class Trainer:
    def __init__(self, model):
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(self, x, y):
        {forward}
        loss = nn.functional.cross_entropy(out, y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()

def main(x, y):
    model = DDP(Pair())
    trainer = Trainer({given})
    trainer.step(x, y)
'''
BYPASS_LINE = 22


def _trainer(forward: str, given: str = "model") -> str:
    return textwrap.dedent(TRAINER).replace("{forward}", forward).replace("{given}", given)


def test_submodules_of_stored_wrapper_bypass_ddp_is_gt453() -> None:
    src = _trainer("inner = self.model.module\n        out = inner.head(inner.enc(x))")
    assert set(_findings(src, "GT453")) == {BYPASS_LINE}  # both submodule calls


def test_stored_wrapper_called_is_silent() -> None:
    assert _findings(_trainer("out = self.model(x)"), "GT453") == []


def test_stored_plain_model_is_silent() -> None:
    """The trainer is given the inner model, not the wrapper: nothing to bypass."""
    src = _trainer("inner = self.model.module\n        out = inner.head(inner.enc(x))", "Pair()")
    assert _findings(src, "GT453") == []
