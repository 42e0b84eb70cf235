"""Shapes from the projects of docs/triage/unseen53b.md (session 53), each in another
spelling than the project's and next to a buggy twin that is still reported; all run on real
torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
'''

# the generator of `filter(...)` handed straight to an optimizer nested in a wrapper's call
NESTED = '''
class Warmup:
    def __init__(self, optimizer, scale):
        self.optimizer, self.scale = optimizer, scale


def build(model):
    params = filter(lambda p: p.requires_grad, model.parameters())
{count}
    wrapped = Warmup(
        torch.optim.Adam(
            params,
            betas=(0.9, 0.98),
        ),
        2.0,
    )
    return wrapped
opt = build(nn.Linear(3, 2))
'''

# an evaluation pass that kept the training loop's `zero_grad()`/`step()` but no backward
EVAL = '''
def run(model, batches):
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    model.{mode}()
    ce = nn.CrossEntropyLoss()
    total = 0.0
    for x, y in batches:
        opt.zero_grad()
        loss = ce(model(x), y)
        opt.step()
        total += loss.item()
    return total
model = nn.Linear(4, 3)
before = model.weight.detach().clone()
run(model, [(torch.randn(5, 4), torch.randint(0, 3, (5,)))])
'''

# a loss accumulated per batch, but the zero made before the loop is what is backpropagated
ZERO = '''
def train(model, batches, opt):
    {first}
    for x, y in batches:
        opt.zero_grad()
        total = F.mse_loss(model(x), y)
        held.backward()
        opt.step()
model, head = nn.Linear(3, 2), nn.Linear(2, 2)
x0 = torch.randn(4, 2)
train(head, [(torch.randn(4, 2), torch.randn(4, 2))] * 2, torch.optim.SGD(head.parameters(), lr=0.1))
'''

# a decoder's initial hidden state, a Parameter cast on every call of its maker (two files)
DECODER = '''
import torch
import torch.nn as nn


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(3, 4)

    def init_hidden(self, n):
        return nn.Parameter(torch.zeros(n, 4)).double()

    def forward(self, x, h):
        return self.cell(x, h.float())
'''
GREEDY = '''
import torch
from decoder import Decoder


class Greedy:
    def __call__(self, decoder, xs):
        {use}
        for x in xs:
            hidden = decoder(x, hidden)
        return hidden

out = Greedy()(Decoder(), [torch.randn(2, 3)] * 3)
'''

# a helper that trims a prediction and hands the target back (sliced or whole)
TRIM = '''
def match(pred, wav):
    if pred.size(-1) > wav.size(-1):
        return pred[..., :wav.size(-1)], wav
    return pred, wav[..., :pred.size(-1)]


G, D = nn.Linear(4, 6), nn.Linear(6, 1)
g_opt = torch.optim.Adam(G.parameters(), 1e-3)
d_opt = torch.optim.Adam(D.parameters(), 1e-3)
wav, z = torch.randn(2, 6), torch.randn(2, 4)
pred = G(z)
{first}
loss_d = (D(pred.detach()) ** 2).mean() + ((D(wav) - 1) ** 2).mean() + {extra}
d_opt.zero_grad()
loss_d.backward()
d_opt.step()
loss_g = ((D(pred) - 1) ** 2).mean() + F.l1_loss(pred, wav)
g_opt.zero_grad()
loss_g.backward()
g_opt.step()
'''

SHAPES = {
    "filter-handed-to-a-nested-optimizer": (
        Shape(NESTED.format(count="    pass"), "GT405", holds="len(opt.optimizer.param_groups[0]['params']) == 2"),
        Shape(NESTED.format(count="    print(sum(p.numel() for p in params))"), "GT405", line=8,
              raises=(ValueError, "empty parameter list"))),
    "evaluation-pass-with-copied-steps": (
        Shape(EVAL.format(mode="eval"), "GT545", holds="torch.equal(before, model.weight)"),
        Shape(EVAL.format(mode="train"), "GT545", line=8, holds="torch.equal(before, model.weight)")),
    "zero-made-before-the-loop": (
        Shape(ZERO.format(first="held = torch.tensor(0)"), "GT507",
              raises=(RuntimeError, "does not require grad")),
        Shape(ZERO.format(first="held = F.mse_loss(model(x0), torch.zeros(4, 2)).sum()"), "GT507",
              line=2, raises=(RuntimeError, "second time"))),
    "target-handed-back-through-a-helper": (
        Shape(TRIM.format(first="pred, wav = match(pred, wav)", extra="0"), "GT509",
              holds="loss_g.item() > 0"),
        Shape(TRIM.format(first="pred, wav = match(pred, G(z).tanh())", extra="0"),
              "GT509", line=13, raises=(RuntimeError, "second time"))),
}


@pytest.mark.parametrize("name,which", [(n, i) for n in SHAPES for i in (0, 1)])
def test_shape(name: str, which: int) -> None:
    judge(PRELUDE, SHAPES[name][which])


@pytest.mark.parametrize("use,line", [
    ("hidden = decoder.init_hidden(2)", None),  # the loop's initial state, replaced on pass 1
    ("hidden = decoder.init_hidden(2)\n        opt = torch.optim.SGD([hidden], lr=0.1)", 12),
])
def test_initial_recurrent_state(tmp_path, monkeypatch, use: str, line: int | None) -> None:
    """GT403 on a method returning ``nn.Parameter(...).double()``: silent when every caller
    (another file) binds it as a loop's initial state, reported when one hands it to an
    optimizer (which raises)."""
    import sys
    from gradtrace.lint.config import Settings
    from gradtrace.lint import check_paths
    (tmp_path / "decoder.py").write_text(DECODER)
    (tmp_path / "greedy.py").write_text(GREEDY.format(use=use))
    found = [f for f in check_paths([str(tmp_path)], Settings()).findings if f.code == "GT403"]
    assert [(f.line, f.code) for f in found] == ([] if line is None else [(line, "GT403")])
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("decoder", None)
    env: dict = {}
    code = compile(GREEDY.format(use=use), str(tmp_path / "greedy.py"), "exec")
    if line is None:
        exec(code, env)
        assert env["out"].shape == (2, 4)
    else:
        with pytest.raises(ValueError, match="non-leaf"):
            exec(code, env)
