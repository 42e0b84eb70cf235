"""A parameter's kind from every call of its function in the file, in the core kind lookup
(NOTE [parameter kinds]); a helper's returned tuple unpacked (``model, opt = setup()``).
Rules that read kinds see through the function boundary: GT407 (a module's ``requires_grad``
set in a helper taking the module), GT515 (a scheduler returned by a helper). Twins and
look-alikes run on real torch."""
from __future__ import annotations

import ast
import textwrap

import pytest

from gradtrace.lint import check_source
from gradtrace.lint.context import Context
from gradtrace.lint.names import Imports

torch = pytest.importorskip("torch")

HEAD = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x):
        return self.fc(x)
'''


def _ctx(src: str) -> Context:
    text = textwrap.dedent(HEAD + src)
    tree = ast.parse(text)
    imports = Imports()
    for s in ast.walk(tree):
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            imports.add(s)
    return Context("m.py", text, tree, imports)


def _kind(src: str, fn: str, name: str) -> tuple | None:
    ctx = _ctx(src)
    node = next(n for n in ast.walk(ctx.tree)
                if isinstance(n, ast.FunctionDef) and n.name == fn) if fn else ctx.tree
    k = ctx.analysis.kind_in(ast.parse(name, mode="eval").body, node, 10 ** 9)
    return None if k is None else (k.what, k.cls, tuple(sorted(k.over)))


def _codes(src: str) -> list[tuple[str, int]]:
    text = textwrap.dedent(HEAD + src)
    exec(compile(text, "<snippet>", "exec"), {})
    return [(f.code, f.line) for f in check_source(text)]


# -- the core lookup ------------------------------------------------------------------------
def test_one_caller_gives_the_kinds_of_its_arguments() -> None:
    src = '''
def train(model, opt, n=2):
    pass

net = Net()
train(net, torch.optim.SGD(net.parameters(), lr=0.1))
'''
    assert _kind(src, "train", "model") == ("module", "Net", ())
    # the optimizer's parameters are renamed to the function's own name for them
    assert _kind(src, "train", "opt") == ("optimizer", None, ("model",))
    assert _kind(src, "train", "n") == ("number", None, ())  # the default value
    assert _kind(src, "train", "model.fc") == ("module", "torch.nn.Linear", ())


def test_callers_that_agree_and_callers_that_disagree() -> None:
    agree = '''
def evaluate(net, x):
    pass

evaluate(Net(), torch.randn(2, 4))
evaluate(Net().eval(), torch.randn(2, 4))
'''
    assert _kind(agree, "evaluate", "net") == ("module", "Net", ())
    disagree = agree + "evaluate(nn.Linear(4, 1), torch.randn(2, 4))\n"
    assert _kind(disagree, "evaluate", "net") is None
    unknown = agree + "evaluate(load_somehow(), torch.randn(2, 4))\n"
    assert _kind(unknown, "evaluate", "net") is None


def test_methods_through_self_and_through_an_instance() -> None:
    src = '''
class Trainer:
    def fit(self, data):
        self.step(Net(), data)

    def step(self, model, batch):
        pass

    def probe(self, model):
        pass

t = Trainer()
t.probe(Net())
'''
    assert _kind(src, "step", "model") == ("module", "Net", ())
    assert _kind(src, "probe", "model") == ("module", "Net", ())


def test_keyword_arguments_recursion_and_hops() -> None:
    src = '''
def inner(m, depth):
    if depth:
        inner(m, depth - 1)

def outer(model):
    inner(depth=2, m=model)

outer(Net())
'''
    assert _kind(src, "inner", "m") == ("module", "Net", ())


def test_a_function_used_as_a_value_has_callers_we_do_not_see() -> None:
    src = '''
def hook(module, inputs, output):
    pass

net = Net()
hook(net, None, None)
net.fc.register_forward_hook(hook)
'''
    assert _kind(src, "hook", "module") is None


def test_a_helpers_returned_tuple_is_unpacked() -> None:
    src = '''
def setup(lr):
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    return model, opt

net, optimizer = setup(0.1)
'''
    assert _kind(src, "", "net") == ("module", "Net", ())
    assert _kind(src, "", "optimizer") == ("optimizer", None, ("net",))  # its caller's name


def test_returned_tuples_that_differ_leave_it_unknown() -> None:
    src = '''
def setup(big):
    if big:
        return Net(), 1
    return nn.Linear(4, 1), 2

net, size = setup(True)
'''
    assert _kind(src, "", "net") is None
    assert _kind(src, "", "size") == ("number", None, ())


# -- rules that read kinds ------------------------------------------------------------------
FREEZE = '''
class Two(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(4, 8)
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        return self.head(torch.relu(self.backbone(x)))


def freeze(part):
    part.requires_grad = False


model = Two()
w = torch.zeros(3)
{calls}
opt = torch.optim.SGD(model.parameters(), lr=0.1)
opt.zero_grad()
model(torch.randn(8, 4)).pow(2).mean().backward()
opt.step()
'''


def test_gt407_module_frozen_by_attribute_in_a_helper() -> None:
    src = FREEZE.format(calls="freeze(model.backbone)")
    assert ("GT407", 25) in _codes(src)


def test_gt407_helper_given_a_module_by_its_return() -> None:
    src = FREEZE.format(calls="def part_of(m):\n    return m.backbone\n\n\n"
                              "freeze(part_of(model))")
    assert ("GT407", 25) in _codes(src)


def test_gt407_helper_given_a_tensor_is_silent() -> None:
    assert [c for c in _codes(FREEZE.format(calls="freeze(w)")) if c[0] == "GT407"] == []


def test_gt407_helper_given_a_module_and_a_tensor_is_silent() -> None:
    src = FREEZE.format(calls="freeze(w)\nfreeze(model.backbone)")
    assert [c for c in _codes(src) if c[0] == "GT407"] == []


SCHED = '''
def make_optim(model):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    second = {second}
    return opt, second


model = Net()
opt, sched = make_optim(model)
for x, y in [(torch.randn(8, 4), torch.randn(8, 1))] * 3:
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    {first}
    {then}
'''
STEPLR = "torch.optim.lr_scheduler.StepLR(opt, step_size=1)"


def test_gt515_scheduler_returned_by_a_helper_steps_first() -> None:
    src = SCHED.format(second=STEPLR, first="sched.step()", then="opt.step()")
    assert ("GT515", 25) in _codes(src)


def test_gt515_scheduler_returned_by_a_helper_steps_after() -> None:
    src = SCHED.format(second=STEPLR, first="opt.step()", then="sched.step()")
    assert [c for c in _codes(src) if c[0] == "GT515"] == []


def test_gt515_helper_returning_another_stepped_object_is_silent() -> None:
    # the second value is a plain object with a `step()` of its own, not a scheduler
    src = SCHED.format(second="Counter()", first="sched.step()", then="opt.step()")
    src = "\nclass Counter:\n    def step(self):\n        pass\n" + src
    assert [c for c in _codes(src) if c[0] == "GT515"] == []


def test_owners_the_function_cannot_see_are_left_unknown() -> None:
    src = '''
def train(opt):
    pass

def main():
    net = Net()
    train(torch.optim.SGD(net.parameters(), lr=0.1))

def shadow(opt):
    net = Net()

net = Net()
shadow(torch.optim.SGD(net.parameters(), lr=0.1))
'''
    assert _kind(src, "train", "opt") == ("optimizer", None, ())  # `net` is main's own
    assert _kind(src, "shadow", "opt") == ("optimizer", None, ())  # another `net` there


def test_gt407_a_modules_own_requires_grad_setting_is_silent() -> None:
    # a module keeping a flag its own code reads (allennlp's Elmo, speechbrain, PyG's AGNNConv)
    src = '''
class Scaled(nn.Module):
    def __init__(self, requires_grad=False):
        super().__init__()
        self.requires_grad = requires_grad
        self.beta = nn.Parameter(torch.ones(1), requires_grad=requires_grad)

    def forward(self, x):
        return x * self.beta


Scaled(True)(torch.randn(2)).sum().backward()
'''
    assert [c for c in _codes(src) if c[0] == "GT407"] == []
