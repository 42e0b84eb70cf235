"""Shapes from the false alarms unseen53a/b left (docs/triage/prec53.md, session 53), each in
another spelling than the project's, next to a buggy twin still reported; run on real torch."""
from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")


# The tests import their tmp_path files (`net`, `sched`, `heads`) to run them: afterwards none
# of those stays in sys.modules and what they shadowed (the standard library's `sched`) comes
# back (tests/conftest.py ``tmp_imports``).
pytestmark = pytest.mark.usefixtures("tmp_imports")

# a `forward` whose keyword-only flag picks an ensemble arm that sharpens `sigmoid`'s saved
# output in place; the project's callers are in another file
NET = '''
import torch
import torch.nn as nn


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 3)

    def forward(self, x, *, ensemble=None):
        p = torch.sigmoid(self.body(x))
        if ensemble:
            p *= torch.sigmoid(self.body(x.flip(0))).flip(0)
            return p
        return p
'''

RUN = '''
import torch
from net import Scorer

torch.manual_seed(0)
net = Scorer()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x = torch.randn(5, 4)
for _ in range(2):
    opt.zero_grad()
    loss = net({train_call}).sum()
    loss.backward()
    opt.step()
net.eval()
with torch.inference_mode():
    final = net(x, ensemble=True)
'''


@pytest.mark.parametrize("train_call,line", [
    ("x", None),                   # training leaves the flag off; only inference sets it
    ("x, ensemble=True", 14),      # training takes the in-place arm: backward raises
])
def test_flag_arm_for_inference(tmp_path, monkeypatch, train_call: str,
                                line: int | None) -> None:
    """GT602 in the arm of ``if ensemble:`` (a keyword-only flag, default None): silent when
    every call of the project setting the flag runs with grad off, reported when training
    sets it."""
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    (tmp_path / "net.py").write_text(NET)
    (tmp_path / "run.py").write_text(RUN.format(train_call=train_call))
    found = [f for f in check_paths([str(tmp_path)], Settings()).findings
             if f.code in ("GT602", "GT603")]
    assert [(f.line, f.code) for f in found] == ([] if line is None else [(line, "GT602")])
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("net", None)
    code = compile(RUN.format(train_call=train_call), str(tmp_path / "run.py"), "exec")
    env: dict = {}
    if line is None:
        exec(code, env)
        assert env["final"].shape == (5, 3)
    else:
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            exec(code, env)


# a noise table the constructor fills from a helper of another file (a FRESH factory handed
# in), read in `forward` under the square root of `1 - c**2`
SCHED = '''
import torch


def cosine_table(t):
    abar = torch.cos(t * torch.pi / 2) ** 2
    return {"abar": abar.flip(0), "steps": len(t)}
'''

NOISER = '''
import torch
import torch.nn as nn
from sched import cosine_table


class Noiser(nn.Module):
    def __init__(self, steps=8):
        super().__init__()
        self.net = nn.Linear(4, 4)
        {store}

    def forward(self, x, t):
        c = self.table["abar"][t]
        keep = torch.sqrt(1 - c ** 2)
        return self.net(keep[:, None] * x)


torch.manual_seed(0)
model = Noiser()
x = torch.randn(3, 4)
t = torch.tensor([0, 3, 7])
model(x, t).pow(2).sum().backward()
grads = [p.grad for p in model.parameters()] + [model.table["abar"].grad]
'''


@pytest.mark.parametrize("store,line", [
    # the table is data: no gradient reaches the square root
    ('self.table = cosine_table(torch.linspace(0, 1, steps))', None),
    # the table is a trainable parameter that reaches 1 at step 7: inf/NaN in its gradient
    ('self.table = {"abar": nn.Parameter(cosine_table(torch.linspace(0, 1, steps))["abar"])}',
     15),
])
def test_constructor_table_from_data(tmp_path, monkeypatch, store: str,
                                     line: int | None) -> None:
    """GT753 on ``sqrt(1 - c**2)`` with ``c`` read from ``self.table``: silent when the
    constructor fills it from a helper of another file handed a fresh ``linspace``, reported
    when the table holds an ``nn.Parameter``."""
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    (tmp_path / "sched.py").write_text(SCHED)
    (tmp_path / "noiser.py").write_text(NOISER.format(store=store))
    found = [f for f in check_paths([str(tmp_path)], Settings()).findings if f.code == "GT753"]
    assert [(f.line, f.code) for f in found] == ([] if line is None else [(line, "GT753")])
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("sched", None)
    env: dict = {}
    exec(compile(NOISER.format(store=store), str(tmp_path / "noiser.py"), "exec"), env)
    finite = [bool(torch.isfinite(g).all()) for g in env["grads"] if g is not None]
    if line is None:
        assert all(finite) and len(finite) == 2
    else:
        assert not all(finite)  # the table's gradient at c == 1


# a scoring function fetched from the model's method, which hands back a head's attribute
# holding a top-level function of another file
HEADS = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


def {fn}


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.score = {name}

    def forward(self, x):
        return self.fc(x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = Head()

    def forward(self, x):
        return self.head(x)

    def scorer(self):
        return self.head.score
'''

SCORE = '''
import torch
from heads import Net

torch.manual_seed(0)


def evaluate(net, batches):
    total = 0
    score = net.scorer()
    for x, y in batches:
        total += score(net(x), y)
    return total


result = evaluate(Net(), [(torch.randn(5, 4), torch.randint(0, 3, (5,))) for _ in range(3)])
'''


@pytest.mark.parametrize("fn,name,line", [
    # counts hits into a Python int: nothing outlives a batch
    ("hits(out, y):\n    return int((out.argmax(1) == y).sum())", "hits", None),
    # the fetched function is the loss: every batch's graph is kept in `total`
    ("nll(out, y):\n    return F.cross_entropy(out, y)", "nll", 12),
])
def test_callable_fetched_from_a_method(tmp_path, monkeypatch, fn: str, name: str,
                                        line: int | None) -> None:
    """GT505 on ``total += score(...)`` with ``score = net.scorer()``: silent when every
    ``def scorer`` hands back a ``self....score`` that holds a graphless function, reported
    when it holds the loss."""
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    (tmp_path / "heads.py").write_text(HEADS.format(fn=fn, name=name))
    (tmp_path / "score.py").write_text(SCORE)
    found = [f for f in check_paths([str(tmp_path)], Settings()).findings if f.code == "GT505"]
    assert [(f.line, f.code) for f in found] == ([] if line is None else [(line, "GT505")])
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("heads", None)
    env: dict = {}
    exec(compile(SCORE, str(tmp_path / "score.py"), "exec"), env)
    if line is None:
        assert isinstance(env["result"], int)
    else:
        assert env["result"].grad_fn is not None  # three batches' graphs held
