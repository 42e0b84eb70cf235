"""`gradtrace run` on `'NoneType' object has no attribute ...` from a loop that reads `.grad` of
every parameter while some parameter is never graded by design (NOTE [every parameter read, some
never graded] in `runtime/trace/grad_none.py`; issue 13 §2): the loop's line, not the module of
the parameter without a gradient.

Bugs: a head whose output the caller unpacks into `_` (BERT's pooler, run_squad's loss scale), in
a `for` loop and in a generator expression; a head another task family uses and this one never
calls (MAML's meta-gradient average); a frozen submodule read by a comprehension written over two
lines (torch-ac's gradient norm).

Look-alikes: the same loops guarded with `if p.grad is not None` train silently; a parameter the
forward used whose gradient an `argmax` cut keeps the cut's line (the cause, not the loop).
Real torch, in-process `gradtrace run`.
"""
from __future__ import annotations

import pytest

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(6, 8)
        self.pooler = nn.Linear(8, 8)

    def forward(self, x):
        h = torch.relu(self.body(x))
        return h, torch.tanh(self.pooler(h))


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = Encoder()
        self.out = nn.Linear(8, 3)

    def forward(self, x):
        seq, _ = self.enc(x)
        return self.out(seq)


torch.manual_seed(0)
model = Tagger()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
"""

BUGS = {
    # the pooler ran, its output went to `_`
    "unused_output_for_loop": """
for step in range(2):
    loss = F.cross_entropy(model(torch.randn(4, 6)), torch.randint(0, 3, (4,))) * 8.0
    loss.backward()
    for p in model.parameters():
        p.grad.data.div_(8.0)  # C
    opt.step()
    opt.zero_grad()
""",
    "unused_output_generator_norm": """
def update(x, y):
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    norm = sum(q.grad.norm() ** 2 for q in model.parameters()) ** 0.5  # C
    opt.step()
    return norm

update(torch.randn(4, 6), torch.randint(0, 3, (4,)))
""",
    # a head another task family uses, never called here (MAML's meta-gradient average)
    "head_never_called_for_loop": """
model.aux = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for task in range(2):
    F.cross_entropy(model(torch.randn(4, 6)), torch.randint(0, 3, (4,))).backward()
for w in model.parameters():
    w.grad.data.mul_(0.5)  # C
opt.step()
""",
    "frozen_submodule_list_comprehension": """
for p in model.enc.body.parameters():
    p.requires_grad = False
F.cross_entropy(model(torch.randn(4, 6)), torch.randint(0, 3, (4,))).backward()
scaled = [w.grad.data * 0.5 for w in model.out.parameters()] + [
    w.grad.data * 0.5 for w in model.enc.body.parameters()]  # C
""",
}

LOOKALIKES = {
    "guarded_for_loop": """
for step in range(2):
    loss = F.cross_entropy(model(torch.randn(4, 6)), torch.randint(0, 3, (4,))) * 8.0
    loss.backward()
    for p in model.parameters():
        if p.grad is not None:
            p.grad.data.div_(8.0)
    opt.step()
    opt.zero_grad()
""",
    "guarded_generator_norm": """
opt.zero_grad()
F.cross_entropy(model(torch.randn(4, 6)), torch.randint(0, 3, (4,))).backward()
norm = sum(q.grad.norm() ** 2 for q in model.parameters() if q.grad is not None) ** 0.5
opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_loop_over_every_parameter_is_named(run_script, name):
    src = (HEAD + BUGS[name]).lstrip("\n")
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))
    res = run_script(src)
    assert res.code == 1 and "'NoneType' object has no attribute" in res.err, res.err
    first = res.findings[0]
    assert (first["code"], first["line"]) == ("GT801", line), (first, res.err)


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_guarded_loop_trains_silent(run_script, name):
    res = run_script((HEAD + LOOKALIKES[name]).lstrip("\n"))
    assert res.code == 0 and res.findings == [], (res.findings, res.err)


def test_a_cut_on_the_used_parameter_keeps_the_cut(run_script):
    src = """
import torch
import torch.nn as nn

enc = nn.Linear(5, 4)
dec = nn.Embedding(4, 3)
opt = torch.optim.SGD([*enc.parameters(), *dec.parameters()], lr=0.1)
idx = torch.argmax(enc(torch.randn(6, 5)), dim=1)  # C
dec(idx).sum().backward()
for p in [*enc.parameters(), *dec.parameters()]:
    p.grad.data.mul_(0.5)
"""
    line = next(i for i, t in enumerate(src.lstrip("\n").splitlines(), 1) if t.endswith("# C"))
    res = run_script(src)
    first = res.findings[0]
    assert res.code == 1 and (first["code"], first["line"]) == ("GT801", line), (first, res.err)
