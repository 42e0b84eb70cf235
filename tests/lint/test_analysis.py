"""The analysis layer: kinds through self attributes, script variables, attribute chains and
the returns of the file's own functions; the classes' registered and plain attributes."""
from __future__ import annotations

import ast
import textwrap

from gradtrace.lint.analysis import Analysis
from gradtrace.lint.context import Context
from gradtrace.lint.names import Imports

SRC = '''
import torch
import torch.nn as nn
from torch.utils.data import DataLoader


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 8)
        self.scale = nn.Parameter(torch.ones(8))
        self.memory = torch.randn(16, 8)
        self.blocks = [nn.Linear(8, 8), nn.Linear(8, 8)]
        self.register_buffer("mask", torch.ones(8))

    def forward(self, x):
        return self.helper(x) * self.scale

    def helper(self, x):
        return self.fc(x) @ self.memory.t()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.head = nn.Linear(8, 1)


class Trainer:
    def __init__(self, data):
        self.model = build()
        self.opt = make_optimizer(self.model)
        self.loader = DataLoader(data, batch_size=4)

    def fit(self):
        for x in self.loader:
            self.model.encoder.fc(x)


def build():
    net = Net()
    return net.to("cpu")


def make_optimizer(model, lr=0.1):
    params = list(model.parameters())
    return torch.optim.SGD(params, lr=lr)


model = build()
opt = make_optimizer(model.encoder)
sched = torch.optim.lr_scheduler.StepLR(opt, 10)
w = torch.zeros(3, requires_grad=True)
n = 3
model.head = nn.Linear(8, 2)
'''


def make() -> tuple[Analysis, ast.Module, Context]:
    text = textwrap.dedent(SRC)
    tree = ast.parse(text)
    imports = Imports()
    for s in tree.body:
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            imports.add(s)
    ctx = Context("m.py", text, tree, imports)
    return ctx.analysis, tree, ctx


def expr(src: str) -> ast.expr:
    return ast.parse(src, mode="eval").body


def test_context_caches_one_analysis() -> None:
    an, _, ctx = make()
    assert ctx.analysis is an
    ctx.release()
    assert ctx.analysis is not an


def test_module_classes_and_plain_classes() -> None:
    an, _, _ = make()
    assert an.module_classes == {"Encoder", "Net"}
    assert not an.classes["Trainer"].is_module


def test_registered_and_plain_attributes() -> None:
    an, _, _ = make()
    enc = an.classes["Encoder"]
    assert [enc.attr_kind(a).what for a in ("fc", "scale", "memory", "blocks", "mask")] == \
        ["module", "parameter", "tensor", "container", "buffer"]
    assert enc.attr_kind("fc").cls == "torch.nn.Linear"
    assert [enc.registered(a) for a in ("fc", "scale", "memory", "blocks", "mask")] == \
        [True, True, False, False, True]
    assert enc.forward_uses == {"fc", "memory", "scale"}  # through the helper method


def test_script_variables_and_helper_returns() -> None:
    an, tree, ctx = make()
    scope = ctx.scope(tree)
    end = len(ctx.lines) + 1
    k = an.kind(expr("model"), scope, end)
    assert (k.what, k.cls) == ("module", "Net")  # build() returns Net().to(...)
    k = an.kind(expr("opt"), scope, end)
    assert k.what == "optimizer" and k.over == {"model.encoder"}  # argument substituted
    assert an.kind(expr("sched"), scope, end).what == "scheduler"
    k = an.kind(expr("w"), scope, end)
    assert (k.what, k.requires_grad) == ("tensor", True)
    assert an.kind(expr("n"), scope, end).what == "number"


def test_attribute_chains() -> None:
    an, tree, ctx = make()
    scope = ctx.scope(tree)
    end = len(ctx.lines) + 1
    assert an.kind(expr("model.encoder"), scope, end).cls == "Encoder"
    assert an.kind(expr("model.encoder.fc"), scope, end).cls == "torch.nn.Linear"
    assert an.kind(expr("model.encoder.memory"), scope, end).what == "tensor"
    assert an.kind(expr("model.head"), scope, end).cls == "torch.nn.Linear"
    assert an.kind(expr("model.nothing"), scope, end) is None


def test_self_attributes_across_methods() -> None:
    an, _, ctx = make()
    fit = an.classes["Trainer"].methods["fit"]
    line = fit.body[0].lineno
    assert an.kind_in(expr("self.model"), fit, line).cls == "Net"
    assert an.kind_in(expr("self.model.encoder.fc"), fit, line).cls == "torch.nn.Linear"
    k = an.kind_in(expr("self.opt"), fit, line)
    assert k.what == "optimizer" and k.over == {"self.model"}
    assert an.kind_in(expr("self.loader"), fit, line).what == "loader"


def test_unknown_stays_unknown() -> None:
    an, tree, ctx = make()
    fn = an.functions["make_optimizer"]
    assert an.kind_in(expr("model"), fn, fn.lineno + 1) is None  # an argument


def test_stepped_params() -> None:
    text = textwrap.dedent('''
        def inner(o):
            o.step()
        def train(model, opt, sched, scaler):
            inner(opt)
            scaler.step(opt)
            sched.step()
        ''')
    tree = ast.parse(text)
    ctx = Context("m.py", text, tree, Imports())
    an = ctx.analysis
    assert an.stepped_params(an.functions["train"]) == {"opt", "sched", "scaler"}
    assert an.stepped_params(an.functions["inner"]) == {"o"}


def test_binding_before_sees_bindings_recorded_after_an_early_lookup():
    """A name bound many times (the binary-search path) whose lines were looked up while the
    scope was still recording (kinds look at earlier bindings) still finds its later ones."""
    text = "\n".join(f"x = {i}" for i in range(8)) + "\ny = x\nx = 99\nx = 100\n"
    tree = ast.parse(text)
    scope = Context("m.py", text, tree, Imports()).scope(tree)
    assert scope.binding_before("x", 12).line == 11
    assert [b.line for b in scope.bindings_before("x", 11)][-2:] == [8, 10]
