"""The questions several rule families ask of the analysis layer, each answered in one place
(docs/triage/tracer3.md): which function of the file a call runs, what a function returns when
its arguments carry nothing, and the two readings of "every result made under grad-off"."""
from __future__ import annotations

import ast
import textwrap

from gradtrace.lint.analysis.grad_off_returns import grad_off_cut, returns_off
from gradtrace.lint.analysis.origins import argument_returns, data_helper, helper_is_pure
from gradtrace.lint.analysis.reach import called_function
from gradtrace.lint.context import Context
from gradtrace.lint.names import Imports


def _ctx(src: str) -> Context:
    text = textwrap.dedent(src)
    tree = ast.parse(text)
    imports = Imports()
    for s in tree.body:
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            imports.add(s)
    return Context("m.py", text, tree, imports)


def _calls(ctx: Context, fn: ast.AST) -> dict[str, ast.Call]:
    return {ast.unparse(n): n for n in ast.walk(fn) if isinstance(n, ast.Call)}


def _runs(ctx: Context, fn: ast.AST, call: str) -> str | None:
    c = _calls(ctx, fn)[call]
    got = called_function(c, ctx.scope(fn), c.lineno)
    return None if got is None else f"{got.name}:{got.lineno}"


CALLS = '''
import torch.nn as nn

def helper(x):
    return x

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)

    def forward(self, x):
        return self.fc(x)

    def refine(self, x):
        return x

    @staticmethod
    def scale(x):
        return 2 * x

class Env:
    def reward(self, s):
        return s

def train(x):
    model = Net()
    env = Env()
    out = model(x)
    r = env.reward(out)
    y = Net.scale(model.refine(helper(x)))
    helper = print
    helper(y)
'''


def test_called_function_is_one_answer_for_every_family() -> None:
    ctx = _ctx(CALLS)
    train = next(n for n in ctx.tree.body if isinstance(n, ast.FunctionDef) and n.name == "train")
    assert _runs(ctx, train, "helper(x)") == "helper:4"
    assert _runs(ctx, train, "model(x)") == "forward:12"  # an instance runs forward
    assert _runs(ctx, train, "Net()") is None  # constructing runs __init__, not forward
    assert _runs(ctx, train, "model.refine(helper(x))") == "refine:15"
    assert _runs(ctx, train, "Net.scale(model.refine(helper(x)))") == "scale:19"
    assert _runs(ctx, train, "env.reward(out)") == "reward:23"
    assert _runs(ctx, train, "helper(y)") is None  # rebound first: no longer the def


RETURNS = '''
import torch
import torch.nn as nn

model = nn.Linear(2, 2)

def kl(mu, logvar):
    return (mu.pow(2) + logvar.exp()).sum()

def frozen_features(x):
    return model(x).detach()

def get_batch():
    return torch.randn(4, 2), torch.randn(4, 1)

def predict(x):
    return model(x)
'''


def test_argument_returns_answers_pure_and_data_helpers() -> None:
    ctx = _ctx(RETURNS)
    defs = {n.name: n for n in ctx.tree.body if isinstance(n, ast.FunctionDef)}
    for name in ("kl", "frozen_features", "get_batch"):
        assert argument_returns(ctx, defs[name]) is not None, name
        assert helper_is_pure(ctx, name), name
    assert argument_returns(ctx, defs["predict"]) is None  # the module's model: its own graph
    assert not helper_is_pure(ctx, "predict")
    assert data_helper(ctx, defs["get_batch"]) and data_helper(ctx, defs["kl"])
    assert not data_helper(ctx, defs["frozen_features"])  # no graph, but the model's, cut


READINGS = '''
import torch

def accuracy(out, y):
    with torch.no_grad():
        res = []
        res.append((out.argmax(1) == y).float().mean())
        return res

def test(model, loader):
    correct = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
    return correct

def refine(dec, enc):
    with torch.no_grad():
        return dec(enc)
'''


def test_the_two_grad_off_readings_differ_as_documented() -> None:
    """GT1 names one region for every return read by its shape (a list bound there counts);
    GT2/GT5 trace the returned values (a running total summed there counts; a list counts by
    what is appended to it, since session 30). Where both hold, they name the same region
    (NOTE [grad-off returns], NOTE [no-grad helpers])."""
    ctx = _ctx(READINGS)
    defs = {n.name: n for n in ctx.tree.body if isinstance(n, ast.FunctionDef)}
    assert grad_off_cut(ctx, defs["accuracy"]) is not None
    assert returns_off(ctx, defs["accuracy"]) is not None  # `res.append(...)` made there
    assert grad_off_cut(ctx, defs["test"]) is None
    assert returns_off(ctx, defs["test"]) is not None
    cut, off = grad_off_cut(ctx, defs["refine"]), returns_off(ctx, defs["refine"])
    assert cut is not None and isinstance(off, ast.With)
    assert cut.node is off.items[0].context_expr
