"""Shapes from the projects of docs/triage/unseen54b.md (session 54), each in another
spelling than the project's and next to a buggy twin that is still reported; all run on real
torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:Detected call of")

PRELUDE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
'''

# a parameter list grown with `+=` under flags, the optimizer built over all of it
GROWN = '''
class Runner:
    def __init__(self, with_head):
        self.body, self.head, self.other = nn.Linear(4, 4), nn.Linear(4, 1), nn.Linear(4, 1)
        named = list(self.{first}.named_parameters())
        if with_head:
            named += list(self.head.named_parameters())
        self.opt = torch.optim.SGD([p for _, p in named], lr=0.0)

    def fit(self, batches):
        for x, y in batches:
            self.opt.zero_grad()
            loss = 100 * ((self.head(self.body(x)) - y) ** 2).mean()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.body.parameters(), 1.0)
            self.opt.step()


r = Runner(True)
r.fit([(torch.randn(8, 4), torch.randn(8, 1) + 5)])
held = {{id(p) for g in r.opt.param_groups for p in g["params"]}}
body_held = all(id(p) in held for p in r.body.parameters())
'''

# a script's optimizer and scheduler built at module level, the loop in a function
GLOBAL = '''
model = nn.Linear(4, 1)
opt = torch.optim.AdamW(filter(lambda p: p.requires_grad, model.parameters()), lr=0.1)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
before = model.weight.detach().clone()


def show_lr(optimizer):
    return ",".join(str(g["lr"]) for g in optimizer.param_groups)


def train(batches):
    for x, y in batches:
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        {step}
        print(show_lr(opt))


train([(torch.randn(8, 4), torch.randn(8, 1))] * 3)
moved = not torch.equal(before, model.weight)
'''

SHAPES = {
    "parameter-list-grown-with-plus-equals": (
        Shape(GROWN.format(first="body"), "GT549", holds="body_held"),
        Shape(GROWN.format(first="other"), "GT549", line=14, holds="not body_held")),
    "module-level-optimizer-read-in-a-function": (
        Shape(GLOBAL.format(step="opt.step()"), "GT544", holds="moved"),
        Shape(GLOBAL.format(step="sched.step()"), "GT544", line=15, holds="not moved")),
}


@pytest.mark.parametrize("name,which", [(n, i) for n in SHAPES for i in (0, 1)])
def test_shape(name: str, which: int) -> None:
    judge(PRELUDE, SHAPES[name][which])
