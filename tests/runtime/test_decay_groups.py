"""Weight-decay groups the wrong way round (GT889, NOTE [decay groups inverted]): the decayed
groups hold only 1-D tensors (biases, norm weights) and the groups without decay only matrices.
Buggy twins in spellings other than the real-world case (BalancingGroups' get_bert_optim), and
correct splits that stay silent. Real torch, in-process.
"""
from __future__ import annotations

import pytest
from rt_helpers import marked_line

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Embedding(20, 8), nn.LayerNorm(8), nn.Flatten(), nn.Linear(32, 3))
ids, y = torch.randint(0, 20, (6, 4)), torch.randint(0, 3, (6,))

def train(opt):
    for _ in range(3):
        opt.zero_grad()
        F.cross_entropy(model(ids), y).backward()
        opt.step()
"""

BUGS = {
    # the dimension test with its branches swapped
    "ndim_test_swapped": """
def make_optimizer(net, lr=1e-3, wd=0.1):
    decayed, exempt = [], []
    for p in net.parameters():
        if p.ndim < 2:
            decayed.append(p)  # <- cause
        else:
            exempt.append(p)
    groups = [{"params": decayed, "weight_decay": wd},
              {"params": exempt, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr)

train(make_optimizer(model))
""",
    # the group dicts given the two lists the other way round
    "lists_swapped_in_the_groups": """
no_decay = [p for n, p in model.named_parameters() if n.endswith("bias") or n.startswith("1.")]
decay = [p for n, p in model.named_parameters() if not (n.endswith("bias") or n.startswith("1."))]
opt = torch.optim.SGD([
    {"params": no_decay, "weight_decay": 1e-2},  # <- cause
    {"params": decay, "weight_decay": 0},
], lr=0.1)
train(opt)
""",
}

LOOKALIKES = {
    # the split the right way round
    "ndim_test_right": """
decayed = [p for p in model.parameters() if p.ndim >= 2]
exempt = [p for p in model.parameters() if p.ndim < 2]
train(torch.optim.AdamW([{"params": decayed, "weight_decay": 0.1},
                         {"params": exempt, "weight_decay": 0.0}], lr=1e-3))
""",
    # only the norm layer exempt, the biases decayed with the matrices
    "norm_only_exempt": """
norm = list(model[1].parameters())
rest = [p for p in model.parameters() if all(p is not q for q in norm)]
train(torch.optim.AdamW([{"params": rest}, {"params": norm, "weight_decay": 0.0}], lr=1e-3))
""",
    # one group, every tensor decayed; and a second optimizer without decay for the embedding
    "separate_optimizers": """
emb = torch.optim.SGD(model[0].parameters(), lr=0.1)
rest = torch.optim.AdamW([*model[1].parameters(), *model[3].parameters()], lr=1e-3)
for _ in range(3):
    emb.zero_grad()
    rest.zero_grad()
    F.cross_entropy(model(ids), y).backward()
    emb.step()
    rest.step()
""",
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_inverted_groups_named(name, run_script):
    src = HEAD + BUGS[name]
    res = run_script(src)
    assert res.code == 0, res.err
    assert res.findings, res.err
    first = res.findings[0]
    want = ("GT889", marked_line(src), "prog.py")
    assert (first["code"], first["line"], first["path"]) == want, res.findings


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_right_groups_silent(name, run_script):
    res = run_script(HEAD + LOOKALIKES[name])
    assert res.code == 0, res.err
    assert "GT889" not in res.codes(), res.findings
